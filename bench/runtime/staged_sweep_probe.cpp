// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probe (not a benchmark): the staged copier's options swept at one size, both ways, against the pinned bound (a
// pinned buffer's copy of the same size) measured between the configurations, so that defaults are chosen from
// data: chunk size x chunks in the ring x ramped ends x host copy threads. Prints one line per configuration.
// Usage: cuasync_staged_sweep_probe [MiB (default 64)] [reps (default 15)]
//        cuasync_staged_sweep_probe trace [MiB (default 64)]: one default-option copy each way traced after warm-up,
//        its spans printed relative to the call (where a staged copy's time goes, against the pinned copy's).
#include <cuasync/driver.hpp>
#include <cuasync/runtime/staged_copy.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/timeline.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;
namespace b = cuasync::bench;

int main(int argc, char** argv) {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_staged_sweep_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const bool traced = argc > 1 && std::strcmp(argv[1], "trace") == 0;
  if (traced) {
    --argc;
    ++argv;
  }
  const std::size_t size = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64) << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  std::vector<std::byte> host = test::random_bytes(size);
  pinned_buffer pinned = pinned_buffer::allocate(ctx, size);
  device_buffer d = device_buffer::allocate(ctx, size);
  auto gbps = [&](auto&& f) {
    std::vector<double> v;
    f();
    s.synchronize();
    for (int i = 0; i < reps; ++i) {
      const auto t0 = b::clock::now();
      f();
      s.synchronize();
      v.push_back(size / b::us_since(t0) / 1e3);
    }
    return b::summarize(v).median;
  };
  auto bound = [&] {
    const double h = gbps([&] { copy_async(s, d.span(), std::span<const std::byte>(pinned.bytes())); });
    const double dd = gbps([&] { copy_async(s, pinned.bytes(), d.span()); });
    return std::pair{h, dd};
  };
  if (traced) {
    staged_copier c(ctx, staged_copy_options{});
    for (int i = 0; i < 5; ++i) {  // warm-up: the ring, the store choice, the team's threads
      c.copy_to_device(s, d.span(), std::span<const std::byte>(host));
      c.copy_to_host(s, std::span<std::byte>(host), d.span());
    }
    auto show = [&](const char* what, auto&& f) {
      trace::clear();
      trace::enable();
      const std::int64_t t0 = trace::now_ns();
      f();
      s.synchronize();
      const std::int64_t t1 = trace::now_ns();
      trace::disable();
      trace::timeline t = trace::snapshot();
      t.normalize();
      std::printf("%s: %.1f us call to synchronized, %.1f GB/s; spans (us from the call):\n", what, (t1 - t0) / 1e3,
                  size / double(t1 - t0));
      for (const trace::span& sp : t.spans)
        std::printf("  %9.1f %9.1f %8.1f  %-10s %-16s %-28s %8.2f MiB\n", (sp.begin_ns - t0) / 1e3,
                    (sp.end_ns - t0) / 1e3, sp.duration_ns() / 1e3, std::string(trace::to_string(sp.category)).c_str(),
                    t.lane_name(sp.lane).c_str(), sp.name.c_str(), sp.bytes / 1048576.0);
    };
    // The staged copy's DMAs alone: the same chunks (ramped, c/8, c/4, c/2, c, ..., c, c/2, c/4, c/8, when the
    // default ramps) copied back to back from the pinned buffer, no host copies: what chunking itself costs the DMA,
    // against one whole copy.
    const std::size_t cb = staged_copy_options{}.chunk_bytes;
    std::vector<std::size_t> chunks;
    if (!staged_copy_options{}.ramp || size < 4 * cb) {
      for (std::size_t off = 0; off < size; off += cb) chunks.push_back(std::min(cb, size - off));
    } else {
      const std::size_t head = cb / 8 + cb / 4 + cb / 2, middle = size - 2 * head;
      for (std::size_t k = cb / 8; k < cb; k *= 2) chunks.push_back(k);
      for (std::size_t off = 0; off < middle; off += cb) chunks.push_back(std::min(cb, middle - off));
      for (std::size_t k = cb / 2; k >= cb / 8; k /= 2) chunks.push_back(k);
    }
    auto pinned_chunked = [&](bool to_device) {
      std::size_t off = 0;
      for (std::size_t n : chunks) {
        if (to_device)
          copy_async(s, device_span{d.get() + off, n}, std::span<const std::byte>(pinned.bytes().subspan(off, n)));
        else
          copy_async(s, pinned.bytes().subspan(off, n), device_span{d.get() + off, n});
        off += n;
      }
    };
    for (int i = 0; i < 2; ++i) {
      if (!chunks.empty()) {
        show("pinned H2D in the staged copy's chunks", [&] { pinned_chunked(true); });
        show("pinned D2H in the staged copy's chunks", [&] { pinned_chunked(false); });
      }
      show("pinned H2D", [&] { copy_async(s, d.span(), std::span<const std::byte>(pinned.bytes())); });
      show("staged H2D", [&] { c.copy_to_device(s, d.span(), std::span<const std::byte>(host)); });
      show("pinned D2H", [&] { copy_async(s, pinned.bytes(), d.span()); });
      show("staged D2H", [&] { c.copy_to_host(s, std::span<std::byte>(host), d.span()); });
    }
    return 0;
  }
  std::printf("%zu MiB, %d reps; H2D and D2H GB/s (and their ratio to the pinned copy measured just before)\n",
              size >> 20, reps);
  std::printf("chunk_MiB chunks ramp threads  h2d  h2d/pinned  d2h  d2h/pinned\n");
  for (std::size_t chunk_mib : {2, 4, 8, 16})
    for (std::size_t chunks : {4, 8})
      for (bool ramp : {true, false})
        for (unsigned threads : {8u, 12u, 16u}) {
          staged_copy_options o;
          o.chunk_bytes = chunk_mib << 20;
          o.chunks = chunks;
          o.ramp = ramp;
          o.threads = threads;
          staged_copier c(ctx, o);
          const auto [ph, pd] = bound();
          const double h = gbps([&] { c.copy_to_device(s, d.span(), std::span<const std::byte>(host)); });
          const double dd = gbps([&] { c.copy_to_host(s, std::span<std::byte>(host), d.span()); });
          std::printf("%9zu %6zu %4d %7u %5.1f %10.3f %5.1f %10.3f\n", chunk_mib, chunks, ramp ? 1 : 0, threads, h,
                      h / ph, dd, dd / pd);
        }
  return 0;
}
