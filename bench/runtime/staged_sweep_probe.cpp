// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probe (not a benchmark): the staged copier's options swept at one size, both ways, against the pinned bound (a
// pinned buffer's copy of the same size) measured between the configurations, so that defaults are chosen from
// data: chunk size x chunks in the ring x ramped ends x host copy threads. Prints one line per configuration.
// Usage: cuasync_staged_sweep_probe [MiB (default 64)] [reps (default 15)]
#include <cuasync/driver.hpp>
#include <cuasync/runtime/staged_copy.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <cstdio>
#include <cstdlib>
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
