// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Soak (GPU machine): long runs of what a framework does all day, with the process's and the device's resources
// sampled as they go: 10^6 awaited operations over many streams, 10^5 cached compiles and module loads, 10^5 pool
// allocations (device and pinned) over many streams. After warm-up (the first fifth of each phase), host RSS, device
// memory in use, the device pool's reservation, the pinned pool's holdings and the driver objects cuasync keeps
// (pooled events, loaded modules) must stay flat. Prints a table per phase and a verdict; exits 1 on growth.
//   cuasync_soak [scale]   (scale 1: the full counts; 0.01 for a quick look)
#include <cuasync/async_io.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;

namespace {

struct sample {
  long done = 0;
  double seconds = 0;
  long rss_kib = 0;
  long device_used_mib = 0;   // cuMemGetInfo: total - free
  long pool_reserved_mib = 0; // the device pool's reservation
  long pinned_reserved_mib = 0;
  long events = 0;            // pooled events the context's event pool created
  long modules = 0;           // modules loaded and not unloaded by this program
};

long rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct soak {
  std::shared_ptr<runtime::device_runtime> rt = runtime::device_runtime::create(0);
  long live_modules = 0;

  sample take(long done, std::chrono::steady_clock::time_point start) {
    sample s;
    s.done = done;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.rss_kib = rss_kib();
    auto [free_bytes, total] = rt->context().device().memory_info();
    s.device_used_mib = static_cast<long>((total - free_bytes) >> 20);
    s.pool_reserved_mib = static_cast<long>(rt->device_pool().reserved_bytes() >> 20);
    s.pinned_reserved_mib = static_cast<long>(rt->pinned()->stats().bytes_reserved >> 20);
    s.events = static_cast<long>(rt->events()->created());
    s.modules = live_modules;
    return s;
  }
};

// Runs `step(i)` for i in [0, n) in ten slices, sampling after each; prints the table; true when flat after warm-up.
bool phase(soak& sk, const char* name, long n, const std::function<void(long begin, long end)>& run) {
  std::printf("\n## %s: %ld operations\n\n", name, n);
  std::printf("| done | s | RSS KiB | device used MiB | pool reserved MiB | pinned reserved MiB | events | modules |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<sample> samples;
  const auto start = std::chrono::steady_clock::now();
  for (int slice = 0; slice < 10; ++slice) {
    run(n * slice / 10, n * (slice + 1) / 10);
    samples.push_back(sk.take(n * (slice + 1) / 10, start));
    const sample& s = samples.back();
    std::printf("| %ld | %.1f | %ld | %ld | %ld | %ld | %ld | %ld |\n", s.done, s.seconds, s.rss_kib, s.device_used_mib,
                s.pool_reserved_mib, s.pinned_reserved_mib, s.events, s.modules);
    std::fflush(stdout);
  }
  // After warm-up (slice 2) nothing may grow: RSS by at most 2 MiB (allocator noise), the rest not at all.
  const sample& w = samples[1];
  const sample& e = samples.back();
  const long rss = e.rss_kib - w.rss_kib, dev = e.device_used_mib - w.device_used_mib,
             pool = e.pool_reserved_mib - w.pool_reserved_mib, pin = e.pinned_reserved_mib - w.pinned_reserved_mib,
             ev = e.events - w.events, mod = e.modules - w.modules;
  const bool flat = rss <= 2048 && dev <= 0 && pool <= 0 && pin <= 0 && ev <= 0 && mod <= 0;
  std::printf("\n%s: growth after warm-up: RSS %+ld KiB, device %+ld MiB, pool %+ld MiB, pinned %+ld MiB, events %+ld, "
              "modules %+ld, %.0f operations/s: %s\n",
              name, rss, dev, pool, pin, ev, mod, static_cast<double>(n) / e.seconds, flat ? "flat" : "GROWS");
  return flat;
}

// 10^6 awaited launches over 16 streams, 8 in flight per stream, on one io thread.
bool awaited_operations(soak& sk, long n) {
  const char* src = "extern \"C\" __global__ void tick(int* p) { if (p) atomicAdd(p, 1); }\n";
  kernel_ref tick = sk.rt->kernel(jit::program("soak_tick.cu", src), "tick");
  std::vector<stream> streams;
  for (int i = 0; i < 16; ++i) streams.push_back(stream::create(sk.rt->context()));
  return phase(sk, "awaited operations", n, [&](long begin, long end) {
    asio::io_context io;
    long next = begin;
    for (auto& s : streams)
      for (int k = 0; k < 8; ++k)
        asio::co_spawn(
            io,
            [&, sr = stream_ref(s)]() -> asio::awaitable<void> {
              while (next < end) {
                ++next;
                co_await async_launch(sr, tick, launch_config{.grid = 1, .block = 1}, static_cast<int*>(nullptr));
              }
            },
            asio::detached);
    io.run();
  });
}

// 10^5 compiles found in the compiler's memory cache, each loaded as a module, its kernel looked up, then unloaded.
bool compiles_and_loads(soak& sk, long n) {
  jit::compiler compiler;
  const jit::program p("soak_load.cu", "extern \"C\" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n");
  const int cc = sk.rt->properties().compute_capability_major * 10 + sk.rt->properties().compute_capability_minor;
  return phase(sk, "cached compiles and module loads", n, [&](long begin, long end) {
    for (long i = begin; i < end; ++i) {
      auto compiled = compiler.compile(p, cc);
      module m = module::load(sk.rt->context(), compiled->bytes(), "soak_load");
      ++sk.live_modules;
      (void)m.kernel("scale");
      m = module();
      --sk.live_modules;
    }
  });
}

// 10^5 device allocations (4 KiB to 4 MiB) over 16 streams, freed in stream order two steps later, with a pinned
// block of the same size each time.
bool pool_allocations(soak& sk, long n) {
  std::vector<stream> streams;
  for (int i = 0; i < 16; ++i) streams.push_back(stream::create(sk.rt->context()));
  return phase(sk, "pool allocations", n, [&](long begin, long end) {
    std::vector<runtime::tracked_buffer> held;
    for (long i = begin; i < end; ++i) {
      const std::size_t bytes = std::size_t{4096} << (i % 11);
      held.push_back(runtime::tracked_buffer::allocate(*sk.rt, streams[i % 16], bytes));
      auto block = sk.rt->pinned()->allocate(bytes);
      if (held.size() > 2) held.erase(held.begin());
    }
    held.clear();
    for (auto& s : streams) s.synchronize();
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // line by line: a killed run still shows its progress
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  try {
    soak sk;
    std::printf("# cuasync soak on %s (scale %g)\n", sk.rt->properties().name.c_str(), scale);
    bool ok = true;
    ok &= awaited_operations(sk, static_cast<long>(1'000'000 * scale));
    ok &= compiles_and_loads(sk, static_cast<long>(100'000 * scale));
    ok &= pool_allocations(sk, static_cast<long>(100'000 * scale));
    std::printf("\nsoak: %s\n", ok ? "flat" : "GROWS");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("soak: error: %s\n", e.what());
    return 2;
  }
}
