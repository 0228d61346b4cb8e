// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/jit link: an LTO link of 8 parts (a templated kernel and the 7 device functions it calls, each compiled to
// LTO-IR by NVRTC) into one CUBIN, against the raw nvJitLink calls on the same parts in the same run:
//   raw nvJitLink        nvJitLinkCreate, 8 x AddData, Complete, GetLinkedCubin, Destroy (dlopen'ed here)
//   jit::link            cuasync's uncached link (checks, options, logs, lowered names)
//   cached link (memory) compiler::link on a link it made before: one XXH3 pass over the parts, one lookup
//   cached link (disk)   compiler::link in a fresh compiler whose disk cache holds it
// No GPU needed. Usage: cuasync_link_bench OUTPUT_DIR (writes link.json and link.md there).
#include <cuasync/jit.hpp>

#include "bench.hpp"

#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace cuasync;
namespace fs = std::filesystem;
using cuasync::bench::clock;
using cuasync::bench::us_since;

constexpr int parts = 8;
constexpr int arch = 90;

// Part 0: a templated kernel calling op1 ... op7, which it only declares; parts 1-7 define them.
std::vector<jit::program> programs() {
  std::string kernel = "template <typename T>\n__global__ void chain(T* p, int n) {\n"
                       "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  T v = p[i];\n";
  std::string decls;
  for (int k = 1; k < parts; ++k) {
    decls += "extern __device__ float op" + std::to_string(k) + "(float);\n";
    kernel += "  v = op" + std::to_string(k) + "(v);\n";
  }
  kernel += "  p[i] = v;\n}\n";
  std::vector<jit::program> out{jit::program("chain.cu", decls + kernel).add_name_expression("chain<float>")};
  for (int k = 1; k < parts; ++k)
    out.emplace_back("op" + std::to_string(k) + ".cu",
                     "__device__ float op" + std::to_string(k) + "(float x) { return x * " + std::to_string(k) +
                         ".5f + __sinf(x * " + std::to_string(k) + ".0f); }\n");
  return out;
}

struct raw_nvjitlink {
  decltype(&__nvJitLinkCreate_13_0) create = nullptr;
  decltype(&__nvJitLinkDestroy_13_0) destroy = nullptr;
  decltype(&__nvJitLinkAddData_13_0) add = nullptr;
  decltype(&__nvJitLinkComplete_13_0) complete = nullptr;
  decltype(&__nvJitLinkGetLinkedCubinSize_13_0) size = nullptr;
  decltype(&__nvJitLinkGetLinkedCubin_13_0) cubin = nullptr;
  explicit raw_nvjitlink(const std::string& path) {
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error("dlopen " + path);
    create = reinterpret_cast<decltype(create)>(::dlsym(lib, "nvJitLinkCreate"));
    destroy = reinterpret_cast<decltype(destroy)>(::dlsym(lib, "nvJitLinkDestroy"));
    add = reinterpret_cast<decltype(add)>(::dlsym(lib, "nvJitLinkAddData"));
    complete = reinterpret_cast<decltype(complete)>(::dlsym(lib, "nvJitLinkComplete"));
    size = reinterpret_cast<decltype(size)>(::dlsym(lib, "nvJitLinkGetLinkedCubinSize"));
    cubin = reinterpret_cast<decltype(cubin)>(::dlsym(lib, "nvJitLinkGetLinkedCubin"));
    if (!create || !destroy || !add || !complete || !size || !cubin) throw std::runtime_error("nvJitLink symbols");
  }
  std::size_t link(const std::vector<jit::link_part>& in) const {
    const char* options[] = {"-arch=sm_90", "-lto"};
    nvJitLinkHandle h = nullptr;
    if (create(&h, 2, options) != NVJITLINK_SUCCESS) throw std::runtime_error("nvJitLinkCreate");
    for (const auto& p : in)
      if (add(h, NVJITLINK_INPUT_LTOIR, p.program->image.data(), p.program->image.size(), p.program->name.c_str()) !=
          NVJITLINK_SUCCESS)
        throw std::runtime_error("nvJitLinkAddData");
    if (complete(h) != NVJITLINK_SUCCESS) throw std::runtime_error("nvJitLinkComplete");
    std::size_t n = 0;
    size(h, &n);
    std::vector<char> out(n);
    cubin(h, out.data());
    destroy(&h);
    return n;
  }
};

bench::stats time_ms(int samples, auto&& body) {
  std::vector<double> v;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = clock::now();
    body();
    v.push_back(us_since(t0) / 1000.0);
  }
  return bench::summarize(std::move(v));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = bench::output_dir(argc, argv);
  const fs::path scratch = fs::temp_directory_path() / ("cuasync-link-bench-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  bench::report report("link");
  try {
    const auto& nvjitlink = jit::nvjitlink_library();
    report.note("nvjitlink", nvjitlink.version_string() + " (" + nvjitlink.library + ")");
    report.note("nvrtc", jit::nvrtc_library().version_string());
    report.note("link", std::to_string(parts) + " LTO-IR parts (chain<float> calling op1..op7) into one CUBIN sm_90");
    jit::compile_options rdc;
    rdc.relocatable_device_code = true;
    std::vector<jit::link_part> in;
    const auto t0 = clock::now();
    for (const auto& p : programs())
      in.emplace_back(std::make_shared<const jit::compiled_program>(jit::compile(p, {jit::output_kind::ltoir, 90}, rdc)));
    report.note("compiling the 8 parts to LTO-IR (ms)", std::to_string(us_since(t0) / 1000.0));

    const raw_nvjitlink raw(nvjitlink.library);
    constexpr int samples = 9;
    // Interleaved, so that drift (CPU frequency, other load) falls on both alike.
    std::vector<double> raw_ms, ours_ms;
    std::size_t cubin_bytes = 0;
    raw.link(in);
    (void)jit::link(in, arch);
    for (int i = 0; i < samples; ++i) {
      auto t = clock::now();
      cubin_bytes = raw.link(in);
      raw_ms.push_back(us_since(t) / 1000.0);
      t = clock::now();
      (void)jit::link(in, arch);
      ours_ms.push_back(us_since(t) / 1000.0);
    }
    report.note("linked CUBIN (bytes)", std::to_string(cubin_bytes));
    const bench::stats raw_stats = bench::summarize(raw_ms);
    report.add({"jit::link of 8 LTO-IR parts", "ms", bench::summarize(ours_ms), raw_stats, "raw nvJitLink", true,
                "<= 1.1"});

    const fs::path cache_dir = scratch / "cache";
    const jit::disk_cache_settings disk{true, cache_dir, std::uint64_t{1} << 30};
    jit::compiler c(disk);
    if (c.link(in, arch).outcome != jit::cache_outcome::miss) throw std::runtime_error("the cache was not empty");
    const auto memory = bench::measure_us(31, 200, [&] {
      if (c.link(in, arch).outcome != jit::cache_outcome::memory_hit) std::abort();
    });
    bench::stats raw_us = raw_stats;
    for (double* v : {&raw_us.median, &raw_us.p99, &raw_us.min, &raw_us.mean}) *v *= 1000.0;
    report.add({"cached link, memory hit", "us", memory, raw_us, "raw nvJitLink", true, "ours <= 1000 us"});
    const auto from_disk = time_ms(samples, [&] {
      jit::compiler fresh(disk);
      if (fresh.link(in, arch).outcome != jit::cache_outcome::disk_hit) std::abort();
    });
    report.add({"cached link, disk hit (fresh compiler)", "ms", from_disk, raw_stats, "raw nvJitLink", true,
                "ours <= 1 ms"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "link bench failed: %s\n", e.what());
    fs::remove_all(scratch);
    return 1;
  }
  fs::remove_all(scratch);
  report.write(out_dir);
  return 0;
}
