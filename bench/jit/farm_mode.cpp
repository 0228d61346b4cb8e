// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/jit, farm mode: cold compiles of KERNELS distinct templated kernels (default 256, each one instantiation, CUBIN
// sm_90, no cache) in a fresh process each way, repetitions alternated:
//   serial      one thread of one process (the baseline)
//   threads     WORKERS threads of one process (NVRTC serializes inside a process: ~2.6x on the H200)
//   farm        a compile_farm of WORKERS worker processes, started by the first compiles (inside the timing)
//   farm warm   the same after farm.warm_up() and wait_until_ready() (outside the timing)
// Each child reports its time, its own peak resident set and the workers' (the largest one's). The acceptance of
// issue 29: farm >= 8x serial on the H200 (16 hardware threads). WORKERS defaults to the hardware threads, at most 16.
// The worker executable: $CUASYNC_JIT_WORKER, else build/plugins/cuasync-jit-worker (relative to this program).
#include "farm_mode.hpp"

#include <cuasync/jit.hpp>
#include <cuasync/jit/compile_farm.hpp>

#include "bench.hpp"
#include "run_self.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::bench {
namespace {

namespace fs = std::filesystem;

// One distinct kernel: a stencil template instantiated once, its source tagged so no cache can answer.
jit::program kernel(int i, const std::string& tag) {
  const int radius = 1 + i % 4;
  return jit::program("farm_bench_" + std::to_string(i) + ".cu",
                      "template <typename T, int Radius>\n"
                      "__global__ void stencil(const T* __restrict__ in, T* __restrict__ out, int w, int h) {\n"
                      "  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + "
                      "threadIdx.y;\n"
                      "  if (x < Radius || y < Radius || x >= w - Radius || y >= h - Radius) return;\n"
                      "  T acc = 0;\n"
                      "  for (int dy = -Radius; dy <= Radius; ++dy)\n"
                      "    for (int dx = -Radius; dx <= Radius; ++dx) acc += in[(y + dy) * w + x + dx] * T(" +
                          std::to_string(i + 1) + ");\n"
                      "  out[y * w + x] = acc;\n"
                      "}\n// " + tag + " " + std::to_string(i) + "\n")
      .add_name_expression(std::string(i % 2 ? "stencil<float, " : "stencil<double, ") + std::to_string(radius) + ">");
}

const jit::target sm90{jit::output_kind::cubin, 90};

std::uint64_t own_peak_rss() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

}  // namespace

std::string farm_worker_path() {
  if (const char* env = std::getenv("CUASYNC_JIT_WORKER"); env && *env) return env;
  // bench/jit/cuasync_jit_bench -> plugins/cuasync-jit-worker in the build folder (also in a copy of it).
  return (fs::canonical("/proc/self/exe").parent_path() / "../../plugins/cuasync-jit-worker").lexically_normal();
}

int farm_child(int argc, char** argv) {
  if (argc < 5) return 2;
  const std::string mode = argv[1];
  const int kernels = std::atoi(argv[2]);
  const unsigned workers = static_cast<unsigned>(std::atoi(argv[3]));
  const std::string tag = argv[4];
  std::vector<jit::program> programs;
  for (int i = 0; i < kernels; ++i) programs.push_back(kernel(i, tag));
  std::uint64_t bytes = 0, worker_rss = 0;
  double ms = 0;
  if (mode == "--child-farm-serial" || mode == "--child-farm-threads") {
    // A warm process, as the farm's warm workers: NVRTC loaded and one compile made before the timing.
    jit::compile(kernel(-1, tag + "warm"), sm90);
    const unsigned threads = mode == "--child-farm-serial" ? 1 : workers;
    std::atomic<int> next{0};
    std::atomic<std::uint64_t> total{0};
    const auto t0 = clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (int i; (i = next++) < kernels;)
          total += jit::compile(programs[static_cast<std::size_t>(i)], sm90).image.size();
      });
    for (auto& t : pool) t.join();
    ms = us_since(t0) / 1000.0;
    bytes = total;
  } else if (mode == "--child-farm-farm" || mode == "--child-farm-farm-warm") {
    jit::farm_options o;
    o.workers = workers;
    o.worker_path = farm_worker_path();
    jit::nvrtc_library();  // the parent loads NVRTC for the arguments and keys in either case: not timed
    jit::compile_farm farm(o);
    if (mode == "--child-farm-farm-warm") {
      farm.warm_up();
      farm.wait_until_ready();
    }
    const auto t0 = clock::now();
    std::vector<std::shared_future<jit::compile_result>> results;
    for (const auto& p : programs) results.push_back(farm.submit(p, sm90));
    for (auto& r : results) bytes += r.get()->image.size();
    ms = us_since(t0) / 1000.0;
    const auto s = farm.stats();
    if (s.in_process || s.workers_lost) {
      std::fprintf(stderr, "the farm ran in process or lost workers (worker: %s)\n", o.worker_path.c_str());
      return 1;
    }
    worker_rss = s.peak_worker_rss_bytes;
  } else {
    return 2;
  }
  std::printf("ms=%.3f bytes=%llu parent_rss=%llu worker_rss=%llu\n", ms, static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(own_peak_rss()), static_cast<unsigned long long>(worker_rss));
  return 0;
}

int farm_mode(int argc, char** argv) {
  const std::string out_dir = argv[1];
  const int kernels = argc > 3 ? std::atoi(argv[3]) : 256;
  const unsigned workers =
      argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const int repetitions = argc > 5 ? std::atoi(argv[5]) : 2;
  const char* modes[] = {"serial", "threads", "farm", "farm-warm"};
  std::vector<double> per_kernel[4];
  double parent_rss[4] = {}, worker_rss[4] = {};
  std::mt19937_64 rng{std::random_device{}()};
  report r("jit_farm");
  try {
    const auto& nvrtc = jit::nvrtc_library();
    for (int rep = 0; rep < repetitions; ++rep)
      for (int m = 0; m < 4; ++m) {  // alternated, never in blocks
        const std::string out = run_self({std::string("--child-farm-") + modes[m], std::to_string(kernels),
                                          std::to_string(workers), std::to_string(rng())});
        per_kernel[m].push_back(field(out, "ms") / kernels);
        parent_rss[m] = std::max(parent_rss[m], field(out, "parent_rss") / (1 << 20));
        worker_rss[m] = std::max(worker_rss[m], field(out, "worker_rss") / (1 << 20));
        std::fprintf(stderr, "%s: %.2f ms per kernel\n", modes[m], per_kernel[m].back());
      }
    r.note("nvrtc", nvrtc.version_string() + " (" + nvrtc.library + ")");
    r.note("kernels", std::to_string(kernels) + " distinct stencil<T, R> instantiations, " + sm90.to_string() +
                          ", no cache, each variant in a fresh process");
    r.note("workers / threads", std::to_string(workers) + " (hardware threads: " +
                                    std::to_string(std::thread::hardware_concurrency()) + ")");
    r.note("repetitions", std::to_string(repetitions) + ", alternated");
    char buf[160];
    for (int m = 0; m < 4; ++m) {
      std::snprintf(buf, sizeof buf, "%.0f MiB parent%s", parent_rss[m], "");
      std::string mem = buf;
      if (m >= 2) {
        std::snprintf(buf, sizeof buf, ", %.0f MiB each worker at most (%u workers: %.0f MiB in all at most)",
                      worker_rss[m], workers, worker_rss[m] * workers + parent_rss[m]);
        mem += buf;
      }
      r.note(std::string("peak memory, ") + modes[m], mem);
    }
    const stats serial = summarize(per_kernel[0]);
    const double serial_median = serial.median;
    for (int m = 1; m < 4; ++m) {
      std::snprintf(buf, sizeof buf, "%.2fx", serial_median / summarize(per_kernel[m]).median);
      r.note(std::string("rate against one thread, ") + modes[m], buf);
    }
    r.add({"in-process threads (" + std::to_string(workers) + ")", "ms/kernel", summarize(per_kernel[1]), serial,
           "one thread", true, ""});
    r.add({"farm (" + std::to_string(workers) + " workers, started in the timing)", "ms/kernel",
           summarize(per_kernel[2]), serial, "one thread", true, "<= 0.125"});
    r.add({"farm, warmed up", "ms/kernel", summarize(per_kernel[3]), serial, "one thread", true, "<= 0.125"});
    r.add({"farm against in-process threads", "ms/kernel", summarize(per_kernel[2]), summarize(per_kernel[1]),
           "in-process threads", true, "<= 1.0"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit farm bench failed: %s\n", e.what());
    return 1;
  }
  r.write(out_dir);
  return 0;
}

}  // namespace cuasync::bench
