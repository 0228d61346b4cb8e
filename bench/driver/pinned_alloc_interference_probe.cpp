// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probe (not a benchmark): does a pinned allocation on one thread hold up another thread's driver calls? The C ABI's
// first pageable copy calls took 126 ms (H2D) and, a round later, 73 ms (D2H) on an H100 while the grower thread
// allocated a 128 MiB whole block; the simulated driver reproduces both figures only if an allocation keeps every
// other thread's calls out while it runs (bench/results/simulated-c-abi-cold-copy-models.txt). Here, thread A issues
// small asynchronous driver calls in a loop (a 4 KiB pinned-to-device cuMemcpyAsync and a cuEventRecord) and times
// each, while thread B makes, alternately: one cuMemHostAlloc of 128 MiB; 64 of 2 MiB; 128 MiB mapped and touched
// outside the driver, then one cuMemHostRegister; the same registered in 2 MiB pieces. Printed per variant and round:
// B's time in the driver, and A's longest call and call count during it, beside A's longest call with B idle.
// Usage: cuasync_pinned_alloc_interference_probe [rounds, default 3]
#include <cuasync/driver.hpp>

#include "gpu.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;
using clock_type = std::chrono::steady_clock;

namespace {
constexpr std::size_t mib = std::size_t{1} << 20, big = 128 * mib, piece = 2 * mib;

double ms(clock_type::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void must(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(r));
  std::exit(1);
}

// Thread A: small asynchronous calls, each timed; the longest and the count while `measuring`.
struct caller {
  std::atomic<bool> stop{false}, measuring{false};
  std::atomic<long long> longest_ns{0};
  std::atomic<long> calls{0};
  std::atomic<long> finished{0};  // every call, measured or not
  void run(context_ref ctx, CUstream s, CUdeviceptr dev, void* host, CUevent e) {
    scoped_context current(ctx);
    const auto& d = detail::driver();
    while (!stop.load()) {
      const bool measured = measuring.load(std::memory_order_relaxed);  // a call begun in the window counts whole
      const auto t0 = clock_type::now();
      must(d.cuMemcpyAsync(dev, reinterpret_cast<CUdeviceptr>(host), 4096, s), "cuMemcpyAsync");
      must(d.cuEventRecord(e, s), "cuEventRecord");
      const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - t0).count();
      if (measured) {
        longest_ns.store(std::max(longest_ns.load(std::memory_order_relaxed), ns), std::memory_order_relaxed);
        calls.fetch_add(1, std::memory_order_relaxed);
      }
      finished.fetch_add(1);
      if (d.cuEventQuery(e) == CUDA_ERROR_NOT_READY) (void)d.cuStreamSynchronize(s);  // keep the queue short
    }
  }
  void begin() {
    longest_ns = 0;
    calls = 0;
    measuring = true;
  }
  double end_ms() {
    measuring = false;
    const long seen = finished.load();  // the call in flight (begun in the window, maybe held up) ends first
    while (finished.load() < seen + 2) std::this_thread::yield();
    return longest_ns.load() / 1e6;
  }
};

void* touched_mapping(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  std::memset(p, 0, bytes);  // the pages' first touch, outside the driver
  return p;
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_pinned_alloc_interference_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  context_ref ctx = test::ctx();
  scoped_context current(ctx);
  const auto& d = detail::driver();
  stream own = stream::create(ctx);
  const CUstream s = own.get();
  device_buffer dev_buffer = device_buffer::allocate(ctx, 4096);
  pinned_buffer host_buffer = pinned_buffer::allocate(ctx, 4096);
  const CUdeviceptr dev = dev_buffer.get();
  void* host = host_buffer.get();
  CUevent e = nullptr;
  must(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  caller a;
  std::thread ta([&] { a.run(ctx, s, dev, host, e); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const unsigned flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;  // as cuasync's pinned_buffer
  std::printf("variant                               round  B in driver ms  A longest ms  A calls  A idle-B longest ms\n");
  for (int r = 0; r < rounds; ++r) {
    for (int v = 0; v < 4; ++v) {
      a.begin();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      const double idle_longest = a.end_ms();
      std::vector<void*> blocks;
      void* mapping = nullptr;
      if (v >= 2) mapping = touched_mapping(big);  // before the window: only the driver's part is timed
      a.begin();
      const auto t0 = clock_type::now();
      if (v == 0) {
        void* p = nullptr;
        must(d.cuMemHostAlloc(&p, big, flags), "cuMemHostAlloc 128 MiB");
        blocks.push_back(p);
      } else if (v == 1) {
        for (std::size_t i = 0; i < big / piece; ++i) {
          void* p = nullptr;
          must(d.cuMemHostAlloc(&p, piece, flags), "cuMemHostAlloc 2 MiB");
          blocks.push_back(p);
        }
      } else if (v == 2) {
        must(d.cuMemHostRegister(mapping, big, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
             "cuMemHostRegister 128 MiB");
      } else {
        for (std::size_t i = 0; i < big / piece; ++i)
          must(d.cuMemHostRegister(static_cast<char*>(mapping) + i * piece, piece,
                                   CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
               "cuMemHostRegister 2 MiB");
      }
      const double in_driver = ms(clock_type::now() - t0);
      const double longest = a.end_ms();
      const long calls = a.calls.load();
      static const char* names[] = {"cuMemHostAlloc 128 MiB", "cuMemHostAlloc 64 x 2 MiB",
                                    "touched + cuMemHostRegister 128 MiB", "touched + cuMemHostRegister 64 x 2 MiB"};
      std::printf("%-37s %5d  %14.2f  %12.3f  %7ld  %19.3f\n", names[v], r, in_driver, longest, calls, idle_longest);
      // Freed outside the windows (cuMemFreeHost and cuMemHostUnregister wait for the device).
      for (void* p : blocks) (void)d.cuMemFreeHost(p);
      if (v == 2) (void)d.cuMemHostUnregister(mapping);
      if (v == 3)
        for (std::size_t i = 0; i < big / piece; ++i)
          (void)d.cuMemHostUnregister(static_cast<char*>(mapping) + i * piece);
      if (mapping) munmap(mapping, big);
    }
  }
  a.stop = true;
  ta.join();
  (void)d.cuEventDestroy(e);
  return 0;
}
