// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/jit: what a framework pays to get compiled code.
//   cold compile        NVRTC compiling two templated kernels, in a fresh process and in a warm one (no cache)
//   memory hit          compiler::compile on a program already compiled in this process
//   disk hit            compiler::compile in a fresh process (this program re-executed) whose disk cache holds it:
//                       the child's whole path (NVRTC is not loaded when the cache's nvrtc-identity record vouches
//                       for it), and the same with NVRTC loaded first (what a hit cost before that record)
//   PCH                 a header-heavy kernel (<cub/block/block_reduce.cuh>, <cuda/std/complex>) with and without
//                       precompiled headers
// The fresh-process measurements re-execute /proc/self/exe with a mode flag and read the child's timings.
//   farm                `cuasync_jit_bench OUTPUT_DIR farm [KERNELS] [WORKERS]`: cold compiles of many distinct kernels
//                       through the compile farm against one thread and threads of one process (farm_mode.cpp)
//   warm                `cuasync_jit_bench OUTPUT_DIR warm [KERNELS] ...`: a fresh process warm-starting KERNELS kernels
//                       from the disk cache until all are launchable, against one without the warm start (warm_mode.cpp;
//                       needs a GPU or the simulated driver)
// No GPU needed. Usage: cuasync_jit_bench OUTPUT_DIR
#include <cuasync/jit.hpp>

#include "bench.hpp"
#include "farm_mode.hpp"
#include "run_self.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace cuasync;
namespace fs = std::filesystem;
using cuasync::bench::clock;
using cuasync::bench::us_since;
using cuasync::bench::field;
using cuasync::bench::run_self;

// A 2-D stencil and a tiled transpose, both templates: a typical small framework kernel.
const char* const templates_source = R"(
template <typename T, int Radius>
__global__ void stencil(const T* __restrict__ in, T* __restrict__ out, int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < Radius || y < Radius || x >= width - Radius || y >= height - Radius) return;
  T acc = 0;
  for (int dy = -Radius; dy <= Radius; ++dy)
    for (int dx = -Radius; dx <= Radius; ++dx) acc += in[(y + dy) * width + x + dx];
  out[y * width + x] = acc / T((2 * Radius + 1) * (2 * Radius + 1));
}
namespace tile {
template <typename T, int Tile>
__global__ void transpose(const T* __restrict__ in, T* __restrict__ out, int rows, int cols) {
  __shared__ T buf[Tile][Tile + 1];
  int x = blockIdx.x * Tile + threadIdx.x, y = blockIdx.y * Tile + threadIdx.y;
  if (x < cols && y < rows) buf[threadIdx.y][threadIdx.x] = in[y * cols + x];
  __syncthreads();
  x = blockIdx.y * Tile + threadIdx.x;
  y = blockIdx.x * Tile + threadIdx.y;
  if (x < rows && y < cols) out[y * rows + x] = buf[threadIdx.x][threadIdx.y];
}
}  // namespace tile
)";

// `tag` makes each source distinct (a comment), so no cache of any kind can answer.
jit::program templates(const std::string& tag = {}) {
  return jit::program("bench_templates.cu", std::string(templates_source) + "// " + tag + "\n")
      .add_name_expression("stencil<float, 2>")
      .add_name_expression("tile::transpose<double, 32>");
}

jit::program header_heavy(const std::string& tag) {
  return jit::program("bench_heavy.cu", R"(#include <cub/block/block_reduce.cuh>
#include <cuda/std/complex>
// )" + tag + R"(
template <int Block>
__global__ void norm(const cuda::std::complex<float>* in, float* out, int n) {
  using reduce = cub::BlockReduce<float, Block>;
  __shared__ typename reduce::TempStorage storage;
  const int i = blockIdx.x * Block + threadIdx.x;
  const float v = i < n ? cuda::std::norm(in[i]) : 0.f;
  const float sum = reduce(storage).Sum(v);
  if (threadIdx.x == 0) atomicAdd(out, sum);
}
)")
      .add_name_expression("norm<256>");
}

const jit::target target{jit::output_kind::cubin, 90};

std::string nonce() {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::to_string(rng());
}

// Child modes. A disk-hit child times its whole path from entry: opening the cache, whatever NVRTC loading that
// needs (none when the cache's nvrtc-identity record vouches for the NVRTC this process would load), the hit.
// "--child-disk-hit-loaded" loads NVRTC first inside the timed region (what every disk hit paid before the record).
// The cold child loads NVRTC first, timed separately, then compiles.
int child(const std::string& mode, const std::string& arg) {
  auto t0 = clock::now();
  if (mode == "--child-disk-hit" || mode == "--child-disk-hit-loaded") {
    if (mode == "--child-disk-hit-loaded") jit::nvrtc_library();
    jit::compiler c(jit::disk_cache_settings{true, arg, std::uint64_t{1} << 30});
    const auto r = c.compile(templates(), target);
    const double us = us_since(t0);
    if (r.outcome != jit::cache_outcome::disk_hit) {
      std::fprintf(stderr, "expected a disk hit, got %s\n", jit::to_string(r.outcome));
      return 1;
    }
    std::printf("op_us=%.3f nvrtc_loaded=%d\n", us, jit::nvrtc_loaded() ? 1 : 0);
  } else if (mode == "--child-cold") {
    jit::nvrtc_library();
    const double load_us = us_since(t0);
    t0 = clock::now();
    const auto r = jit::compile(templates(arg), target);
    std::printf("nvrtc_load_us=%.3f op_us=%.3f bytes=%zu\n", load_us, us_since(t0), r.image.size());
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}

bench::stats time_ms(int samples, auto&& body) {
  std::vector<double> v;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = clock::now();
    body(i);
    v.push_back(us_since(t0) / 1000.0);
  }
  return bench::summarize(std::move(v));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]).starts_with("--child-farm-")) return bench::farm_child(argc, argv);
  if (argc > 1 && std::string(argv[1]).starts_with("--child-warm-")) return bench::warm_child(argc, argv);
  if (argc > 1 && std::string(argv[1]).starts_with("--child-")) return child(argv[1], argc > 2 ? argv[2] : "");
  if (argc > 2 && std::string(argv[2]) == "farm") return bench::farm_mode(argc, argv);
  if (argc > 2 && std::string(argv[2]) == "warm") return bench::warm_mode(argc, argv);
  const std::string out_dir = bench::output_dir(argc, argv);
  const fs::path scratch = fs::temp_directory_path() / ("cuasync-jit-bench-" + std::to_string(::getpid()));
  fs::remove_all(scratch);
  bench::report report("jit");
  try {
    const auto& nvrtc = jit::nvrtc_library();
    report.note("nvrtc", nvrtc.version_string() + " (" + nvrtc.library + ")");
    report.note("target", target.to_string());
    report.note("kernel", "stencil<float, 2> and tile::transpose<double, 32> (two templates, name expressions)");

    // Cold compiles. In a fresh process (the first compile pays NVRTC's start-up) and in this warm process.
    constexpr int process_samples = 7;
    std::vector<double> cold_fresh, disk_fresh, disk_fresh_loaded, load_fresh;
    for (int i = 0; i < process_samples; ++i) {
      const std::string out = run_self({"--child-cold", nonce()});
      cold_fresh.push_back(field(out, "op_us") / 1000.0);
      load_fresh.push_back(field(out, "nvrtc_load_us") / 1000.0);
    }
    const auto cold_warm = time_ms(10, [](int) { jit::compile(templates(nonce()), target); });

    // Populate a disk cache, then hit it from fresh processes.
    const fs::path cache_dir = scratch / "cache";
    {
      jit::compiler c(jit::disk_cache_settings{true, cache_dir, std::uint64_t{1} << 30});
      if (c.compile(templates(), target).outcome != jit::cache_outcome::miss)
        throw std::runtime_error("the bench's cache was not empty");
    }
    int loaded_in_hit = 0;
    for (int i = 0; i < process_samples; ++i) {
      const std::string out = run_self({"--child-disk-hit", cache_dir.string()});
      disk_fresh.push_back(field(out, "op_us") / 1000.0);
      loaded_in_hit += field(out, "nvrtc_loaded") != 0 ? 1 : 0;
      disk_fresh_loaded.push_back(
          field(run_self({"--child-disk-hit-loaded", cache_dir.string()}), "op_us") / 1000.0);
    }

    // Memory hits: one hash of the source and options, one map lookup.
    jit::compiler memory(jit::disk_cache_settings{false, {}, 0});
    const jit::program p = templates();
    memory.compile(p, target);
    const auto hit = bench::measure_us(31, 2000, [&] {
      if (memory.compile(p, target).outcome != jit::cache_outcome::memory_hit) std::abort();
    });

    const auto cold_fresh_stats = bench::summarize(cold_fresh);
    report.note("nvrtc load in a fresh process (ms, median)", std::to_string(bench::summarize(load_fresh).median));
    report.note("nvrtc loaded by the disk-hit child (samples)",
                std::to_string(loaded_in_hit) + " of " + std::to_string(process_samples));
    report.add({"disk hit in a fresh process (whole path)", "ms", bench::summarize(disk_fresh), cold_fresh_stats,
                "cold compile", true, "<= 0.05"});
    report.add({"disk hit in a fresh process, NVRTC loaded first", "ms", bench::summarize(disk_fresh_loaded),
                cold_fresh_stats, "cold compile", true, ""});
    report.add({"cold compile, warm process", "ms", cold_warm, cold_fresh_stats, "cold compile", true, ""});
    bench::stats cold_us = cold_warm;
    for (double* v : {&cold_us.median, &cold_us.p99, &cold_us.min, &cold_us.mean}) *v *= 1000.0;
    report.add({"memory hit", "us", hit, cold_us, "cold compile (warm process)", true, "ours <= 2 us"});

    // Header-heavy kernel: every compile without PCH parses the headers; with PCH the first one creates it.
    jit::compile_options plain;
    jit::compile_options pch;
    pch.precompiled_headers = true;
    const fs::path pch_dir = scratch / "pch";
    jit::detail::secure_directory(pch_dir, "bench PCH directory");
    constexpr int heavy_samples = 3;
    const auto no_pch = time_ms(heavy_samples, [&](int) { jit::compile(header_heavy(nonce()), target, plain); });
    const auto create = time_ms(1, [&](int) { jit::compile(header_heavy(nonce()), target, pch, pch_dir.string()); });
    const auto with_pch =
        time_ms(heavy_samples, [&](int) { jit::compile(header_heavy(nonce()), target, pch, pch_dir.string()); });
    report.note("header-heavy kernel", "<cub/block/block_reduce.cuh> + <cuda/std/complex>, norm<256>");
    report.note("PCH creation (first compile with --pch, ms)", std::to_string(create.median));
    report.add({"header-heavy kernel with PCH", "ms", with_pch, no_pch, "no PCH", true, "<= 0.33"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit bench failed: %s\n", e.what());
    fs::remove_all(scratch);
    return 1;
  }
  fs::remove_all(scratch);
  report.write(out_dir);
  return 0;
}
