// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probe (not a benchmark): does a pinned allocation on one thread hold up another thread's driver calls? The C ABI's
// first pageable copy calls took 126 ms (H2D) and, a round later, 73 ms (D2H) on an H100 while the grower thread
// allocated a 128 MiB whole block; the simulated driver reproduces both figures only if an allocation keeps every
// other thread's calls out while it runs (bench/results/simulated-c-abi-cold-copy-models.txt). Here, thread A issues
// small asynchronous driver calls in a loop (a 4 KiB pinned-to-device cuMemcpyAsync and a cuEventRecord) and times
// each, while thread B makes 128 MiB of pinned memory, alternately: one cuMemHostAlloc; 64 of 2 MiB, with and without a
// pause between them; mapped and touched outside the driver, then cuMemHostRegister'd whole or in pieces (2 or 4 MiB,
// with and without pauses); with "vmm", VMM host memory (cuMemCreate at the device's host NUMA node) mapped in pieces
// into one range. Printed per variant and round: B's time in the driver, A's longest call and call count during it,
// beside A's longest call with B idle; then a 128 MiB copy each way from that memory (one call where it is one
// range): the call's own time and GB/s; a refused copy shows as minus the driver's error code (a range spanning
// several registrations is refused: CUDA_ERROR_INVALID_VALUE on the H100, session 23).
// Usage: cuasync_pinned_alloc_interference_probe [rounds, default 3] [vmm]
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
  const unsigned reg_flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
  const bool with_vmm = argc > 2 && std::string(argv[2]) == "vmm";
  // A pause between pieces lets the waiting thread in: the driver's lock is not handed over in order, so without
  // one the allocating thread takes it again at once.
  const auto pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(100)); };
  struct variant {
    const char* name;
    int kind;  // 0 cuMemHostAlloc, 1 touched + cuMemHostRegister, 2 VMM host (cuMemCreate + cuMemMap)
    std::size_t piece_bytes;
    bool paused;
  };
  std::vector<variant> variants = {
      {"cuMemHostAlloc 128 MiB", 0, big, false},
      {"cuMemHostAlloc 64 x 2 MiB", 0, piece, false},
      {"cuMemHostAlloc 64 x 2 MiB, paused", 0, piece, true},
      {"register 128 MiB", 1, big, false},
      {"register 64 x 2 MiB", 1, piece, false},
      {"register 64 x 2 MiB, paused", 1, piece, true},
      {"register 32 x 4 MiB, paused", 1, 2 * piece, true},
  };
  // VMM host memory (cuMemCreate at a host NUMA node, mapped in pieces into one range): opt-in, as a driver that
  // does not grant the CPU access ends the probe at the first touch.
  int numa = -1;
  CUdevice device = 0;
  must(d.cuCtxGetDevice(&device), "cuCtxGetDevice");
  (void)d.cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, device);
  if (with_vmm) variants.push_back({"VMM host 64 x 2 MiB, paused", 2, piece, true});
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = numa < 0 ? 0 : numa;
  CUmemAccessDesc access[2]{};
  access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access[0].location.id = static_cast<int>(device);
  access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  access[1].location.id = prop.location.id;
  access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  // Each variant's memory, kept past its window for the copy timing below: base address and how to free it.
  struct made {
    void* base = nullptr;
    std::vector<void*> blocks;                   // cuMemHostAlloc
    std::vector<CUmemGenericAllocationHandle> handles;  // VMM
  };
  const auto make = [&](const variant& v, made& m) {
    const std::size_t n = big / v.piece_bytes;
    for (std::size_t i = 0; i < n; ++i) {
      if (v.paused && i > 0) pause();
      if (v.kind == 0) {
        void* p = nullptr;
        must(d.cuMemHostAlloc(&p, v.piece_bytes, flags), "cuMemHostAlloc");
        m.blocks.push_back(p);
      } else if (v.kind == 1) {
        must(d.cuMemHostRegister(static_cast<char*>(m.base) + i * v.piece_bytes, v.piece_bytes, reg_flags),
             "cuMemHostRegister");
      } else {
        CUmemGenericAllocationHandle h{};
        must(d.cuMemCreate(&h, v.piece_bytes, &prop, 0), "cuMemCreate (host NUMA)");
        const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(m.base) + i * v.piece_bytes;
        must(d.cuMemMap(at, v.piece_bytes, 0, h, 0), "cuMemMap");
        must(d.cuMemSetAccess(at, v.piece_bytes, access, 2), "cuMemSetAccess (device + host)");
        m.handles.push_back(h);
      }
    }
  };
  const auto unmake = [&](const variant& v, made& m) {
    const std::size_t n = big / v.piece_bytes;
    for (void* p : m.blocks) (void)d.cuMemFreeHost(p);
    if (v.kind == 1) {
      for (std::size_t i = 0; i < n; ++i) (void)d.cuMemHostUnregister(static_cast<char*>(m.base) + i * v.piece_bytes);
      munmap(m.base, big);
    }
    if (v.kind == 2) {
      (void)d.cuMemUnmap(reinterpret_cast<CUdeviceptr>(m.base), big);
      for (auto h : m.handles) (void)d.cuMemRelease(h);
      (void)d.cuMemAddressFree(reinterpret_cast<CUdeviceptr>(m.base), big);
    }
  };
  // A 128 MiB copy each way from the variant's memory as one call when it is one range (pieces of cuMemHostAlloc
  // go piece by piece): the call's own time (a staged, synchronous copy would show here) and GB/s.
  device_buffer dev_big = device_buffer::allocate(ctx, big);
  stream copies = stream::create(ctx);
  const auto time_copies = [&](const variant& v, made& m, double out[4]) {
    for (int dir = 0; dir < 2; ++dir) {
      must(d.cuStreamSynchronize(copies.get()), "cuStreamSynchronize");
      const auto t0 = clock_type::now();
      if (v.kind == 0 && m.blocks.size() > 1) {
        for (std::size_t i = 0; i < m.blocks.size(); ++i) {
          const CUdeviceptr at = dev_big.get() + i * v.piece_bytes;
          must(dir == 0 ? d.cuMemcpyHtoDAsync(at, m.blocks[i], v.piece_bytes, copies.get())
                        : d.cuMemcpyDtoHAsync(m.blocks[i], at, v.piece_bytes, copies.get()), "copy piece");
        }
      } else {
        void* host_range = v.kind == 0 ? m.blocks[0] : m.base;
        const CUresult r = dir == 0 ? d.cuMemcpyHtoDAsync(dev_big.get(), host_range, big, copies.get())
                                    : d.cuMemcpyDtoHAsync(host_range, dev_big.get(), big, copies.get());
        if (r != CUDA_SUCCESS) {  // a range over several registrations: refused (CUDA_ERROR_INVALID_VALUE, H100)
          out[dir * 2] = -static_cast<double>(r);
          out[dir * 2 + 1] = 0;
          continue;
        }
      }
      const auto t1 = clock_type::now();
      must(d.cuStreamSynchronize(copies.get()), "cuStreamSynchronize");
      out[dir * 2] = ms(t1 - t0);
      out[dir * 2 + 1] = static_cast<double>(big) / 1e9 / std::chrono::duration<double>(clock_type::now() - t0).count();
    }
  };

  std::printf("variant                               round  B in driver ms  A longest ms  A calls  A idle-B longest ms"
              "  H2D call ms  H2D GB/s  D2H call ms  D2H GB/s\n");
  for (int r = 0; r < rounds; ++r) {
    for (const variant& v : variants) {
      a.begin();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      const double idle_longest = a.end_ms();
      made m;
      if (v.kind == 1) m.base = touched_mapping(big);  // before the window: only the driver's part is timed
      if (v.kind == 2) {
        CUdeviceptr base = 0;
        must(d.cuMemAddressReserve(&base, big, big, 0, 0), "cuMemAddressReserve");
        m.base = reinterpret_cast<void*>(base);
      }
      a.begin();
      const auto t0 = clock_type::now();
      make(v, m);
      const double in_driver = ms(clock_type::now() - t0);
      const double longest = a.end_ms();
      const long calls = a.calls.load();
      if (v.kind == 2) std::memset(m.base, 1, big);  // the CPU's access (the staging ring writes its blocks)
      double copy[4];
      time_copies(v, m, copy);
      std::printf("%-37s %5d  %14.2f  %12.3f  %7ld  %19.3f  %11.3f  %8.1f  %11.3f  %8.1f\n", v.name, r, in_driver,
                  longest, calls, idle_longest, copy[0], copy[1], copy[2], copy[3]);
      unmake(v, m);  // outside the windows (frees and unregistrations wait for the device)
    }
  }
  a.stop = true;
  ta.join();
  (void)d.cuEventDestroy(e);
  return 0;
}
