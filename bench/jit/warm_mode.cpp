// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/jit, warm mode (issue 29's warm start): a fresh process loads KERNELS kernels from a warm disk cache.
//   fill        a child fills a new cache directory with KERNELS distinct programs (one kernel each, for device 0's
//               target) through a compile farm of WORKERS processes; timed, reported, not part of the measure
//   warm start  a fresh child starts runtime::warm_start (THREADS threads) as its first act and, meanwhile, does its
//               other start-up work on the main thread (the primary context, a stream, building its KERNELS program
//               objects); then shared_kernel for every kernel (all launchable), then every kernel launched once
//   no warm     the same child without the warm start: each lookup a disk hit on the main thread (what 1.1 paid)
// Every child's clock starts at its first statement; each phase's end is measured from there. The children check
// that NVRTC was never loaded (the library's flag and /proc/self/maps) and that the kernels ran (a value per kernel
// read back from a few of them). The acceptance: warm start, all launchable <= 1000 ms for 2,000 kernels on the H200.
// `cuasync_jit_bench OUTPUT_DIR warm [KERNELS] [WORKERS] [REPETITIONS] [THREADS] [ptx]` (writes jit_warm.json and
// jit_warm.md); `ptx` compiles PTX (for the simulated driver, which loads no CUBIN).
#include "farm_mode.hpp"

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/compile_farm.hpp>
#include <cuasync/runtime/warm_start.hpp>

#include "bench.hpp"
#include "run_self.hpp"

#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::bench {
namespace {

namespace fs = std::filesystem;

// Kernel i: fills with `value` (what the simulated driver's sim_fill_u32 does, so the bench runs there too), its code
// distinct by a branch that no launch takes.
jit::program kernel(int i) {
  return jit::program("warm_bench/k" + std::to_string(i) + ".cu",
                      "extern \"C\" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned value) {\n"
                      "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) p[i] = n == 0xffffffffu ? " + std::to_string(i) + "u : value;\n"
                      "}\n");
}

jit::output_request request_of(const std::string& arg) {
  return arg == "ptx" ? jit::output_request::ptx : jit::output_request::automatic;
}

double ms_since(clock::time_point t0) { return us_since(t0) / 1000.0; }

bool nvrtc_in_maps() {
  std::ifstream in("/proc/self/maps");
  const std::string maps{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return maps.find("libnvrtc") != std::string::npos;
}

// Fills `dir` with `kernels` entries through a farm of `workers` processes.
int fill_child(int kernels, unsigned workers, const std::string& dir, jit::output_request request) {
  const auto t0 = clock::now();
  const int cc = device::get(0).compute_capability();
  jit::compiler compiler(jit::disk_cache_settings{true, dir, std::uint64_t{4} << 30});
  jit::farm_options o;
  o.workers = workers;
  o.worker_path = farm_worker_path();
  jit::compile_farm farm(o);
  compiler.use_farm(farm);
  std::mutex m;
  std::condition_variable cv;
  int left = kernels, failed = 0;
  for (int i = 0; i < kernels; ++i)
    compiler.compile_async(kernel(i), cc, {}, request, [&](jit::compile_result, std::exception_ptr e) {
      std::lock_guard lock(m);
      if (e) ++failed;
      if (--left == 0) cv.notify_all();
    });
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return left == 0; });
  const auto s = compiler.stats();
  std::printf("fill_ms=%.1f compiles=%llu failed=%d in_process=%d\n", ms_since(t0),
              static_cast<unsigned long long>(s.compiles), failed, farm.stats().in_process ? 1 : 0);
  return failed ? 1 : 0;
}

// A fresh process's start-up: the warm start (unless `threads` is 0), other work, every kernel looked up, then run.
int start_child(int kernels, const std::string& dir, unsigned threads, jit::output_request request) {
  const auto t0 = clock::now();
  jit::compiler compiler(jit::disk_cache_settings{true, dir, std::uint64_t{4} << 30});
  runtime::kernel_cache cache(compiler);
  std::optional<runtime::warm_start> warm;
  if (threads) {
    runtime::warm_start_options o;
    o.threads = threads;
    o.name_prefix = "warm_bench/";
    warm.emplace(cache, 0, o);
  }
  // The process's other start-up work, meanwhile.
  primary_context pc = primary_context::retain(0);
  stream s = stream::create(pc);
  std::vector<jit::program> programs;
  programs.reserve(static_cast<std::size_t>(kernels));
  for (int i = 0; i < kernels; ++i) programs.push_back(kernel(i));
  const double other_ms = ms_since(t0);
  double ready_ms = 0;
  std::size_t loaded = 0, libraries = 0, problems = 0;
  if (warm) {
    const runtime::warm_start_report& r = warm->wait();
    ready_ms = ms_since(t0);
    if (!r.error.empty()) {
      std::fprintf(stderr, "warm start failed: %s\n", r.error.c_str());
      return 1;
    }
    loaded = r.loaded;
    libraries = r.libraries;
    problems = r.stale + r.rejected + r.failed;
    for (const auto& p : r.problems) std::fprintf(stderr, "warm start: %s\n", p.c_str());
  }
  std::vector<kernel_ref> refs;
  refs.reserve(programs.size());
  for (const auto& p : programs) refs.push_back(cache.shared_kernel(pc, p, "sim_fill_u32", {}, request));
  const double launchable_ms = ms_since(t0);
  // Every kernel launched once, each writing its own value into its own slot; a few slots read back.
  const unsigned n = 64;
  device_buffer out = device_buffer::allocate(pc, refs.size() * n * sizeof(unsigned));
  launch_config config;
  config.grid = 1;
  config.block = n;
  for (std::size_t i = 0; i < refs.size(); ++i)
    launch(s, refs[i], config, out.data<unsigned>() + i * n, n,
           static_cast<unsigned>(7 + i));
  s.synchronize();
  const double launched_ms = ms_since(t0);
  std::vector<unsigned> host(refs.size() * n);
  copy_async(s, std::span<std::byte>(reinterpret_cast<std::byte*>(host.data()), host.size() * sizeof(unsigned)),
             out.span());
  s.synchronize();
  int wrong = 0;
  for (std::size_t i = 0; i < refs.size(); i += std::max<std::size_t>(1, refs.size() / 16))
    for (unsigned j = 0; j < n; ++j) wrong += host[i * n + j] != 7 + i;
  const auto st = compiler.stats();
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("other_ms=%.3f ready_ms=%.3f launchable_ms=%.3f launched_ms=%.3f loaded=%zu libraries=%zu problems=%zu "
              "memory_hits=%llu disk_hits=%llu compiles=%llu nvrtc=%d maps=%d wrong=%d rss_mib=%.0f\n",
              other_ms, ready_ms, launchable_ms, launched_ms, loaded, libraries, problems,
              static_cast<unsigned long long>(st.memory_hits), static_cast<unsigned long long>(st.disk.hits),
              static_cast<unsigned long long>(st.compiles), jit::nvrtc_loaded() ? 1 : 0, nvrtc_in_maps() ? 1 : 0,
              wrong, static_cast<double>(ru.ru_maxrss) / 1024);
  return wrong ? 1 : 0;
}

}  // namespace

int warm_child(int argc, char** argv) {
  if (argc < 6) return 2;
  const std::string mode = argv[1];
  const int kernels = std::atoi(argv[2]);
  const std::string dir = argv[3];
  const jit::output_request request = request_of(argv[5]);
  try {
    if (mode == "--child-warm-fill") return fill_child(kernels, static_cast<unsigned>(std::atoi(argv[4])), dir, request);
    if (mode == "--child-warm-start") return start_child(kernels, dir, static_cast<unsigned>(std::atoi(argv[4])), request);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s failed: %s\n", mode.c_str(), e.what());
    return 1;
  }
  return 2;
}

int warm_mode(int argc, char** argv) {
  const std::string out_dir = argv[1];
  const int kernels = argc > 3 ? std::atoi(argv[3]) : 2000;
  const unsigned workers =
      argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const int repetitions = argc > 5 ? std::atoi(argv[5]) : 3;
  const unsigned threads = argc > 6 ? static_cast<unsigned>(std::atoi(argv[6])) : 4;
  const std::string request = argc > 7 ? argv[7] : "auto";
  std::string dir = (fs::temp_directory_path() / "cuasync-warm-bench-XXXXXX").string();
  if (!::mkdtemp(dir.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  report r("jit_warm");
  int status = 0;
  try {
    const std::string fill = run_self({"--child-warm-fill", std::to_string(kernels), dir, std::to_string(workers), request});
    std::fprintf(stderr, "fill: %s", fill.c_str());
    const auto index = jit::read_cache_index(dir);
    std::vector<double> ready, launchable, launched, other, cold_launchable, cold_launched;
    double nvrtc = 0, wrong = 0, problems = 0, rss = 0, cold_rss = 0;
    for (int rep = 0; rep < repetitions; ++rep)
      for (const bool with_warm : {true, false}) {  // alternated, never in blocks
        const std::string out = run_self({"--child-warm-start", std::to_string(kernels), dir,
                                          std::to_string(with_warm ? threads : 0u), request});
        std::fprintf(stderr, "%s: %s", with_warm ? "warm start" : "no warm start", out.c_str());
        nvrtc += field(out, "nvrtc") + field(out, "maps");
        wrong += field(out, "wrong");
        if (field(out, "compiles") != 0) throw std::runtime_error("a child compiled: the cache was not warm");
        (with_warm ? launchable : cold_launchable).push_back(field(out, "launchable_ms"));
        (with_warm ? launched : cold_launched).push_back(field(out, "launched_ms"));
        if (with_warm) {
          ready.push_back(field(out, "ready_ms"));
          other.push_back(field(out, "other_ms"));
          problems += field(out, "problems");
          if (field(out, "libraries") != kernels) throw std::runtime_error("the warm start missed kernels: " + out);
          rss = std::max(rss, field(out, "rss_mib"));
        } else {
          cold_rss = std::max(cold_rss, field(out, "rss_mib"));
        }
      }
    const auto& nv = jit::nvrtc_library();  // for the notes only: after the children
    r.note("kernels", std::to_string(kernels) + " distinct programs, one kernel each (" + std::to_string(index.records.size()) +
                          " index records), request " + request);
    r.note("fill", "compile farm of " + std::to_string(workers) + " workers: " + fill.substr(0, fill.find('\n')));
    r.note("warm start threads", std::to_string(threads));
    r.note("nvrtc", nv.version_string() + " (" + nv.library + "): loaded by no child: " + (nvrtc == 0 ? "yes" : "NO"));
    r.note("kernels that ran wrong (sampled)", std::to_string(static_cast<long>(wrong)));
    r.note("warm start problems (stale, rejected, failed)", std::to_string(static_cast<long>(problems)));
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.0f MiB with warm start, %.0f MiB without", rss, cold_rss);
    r.note("peak resident set", buf);
    r.note("repetitions", std::to_string(repetitions) + ", alternated");
    r.add({"other start-up work done (main thread, meanwhile)", "ms", summarize(other), summarize(other), "itself",
           true, ""});
    r.add({"warm start ended", "ms", summarize(ready), summarize(cold_launchable), "no warm start, all looked up", true,
           ""});
    r.add({"all " + std::to_string(kernels) + " launchable", "ms", summarize(launchable), summarize(cold_launchable),
           "no warm start", true, "<= 1000 ms"});
    r.add({"every kernel launched once, synchronized", "ms", summarize(launched), summarize(cold_launched),
           "no warm start", true, ""});
    if (nvrtc != 0 || wrong != 0) status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit warm bench failed: %s\n", e.what());
    status = 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (status == 0) r.write(out_dir);
  return status;
}

}  // namespace cuasync::bench
