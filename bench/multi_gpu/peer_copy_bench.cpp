// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Peer copy bandwidth through the runtime (tracked buffers, runtime::copy_peer_async) against raw
// cuMemcpyPeerAsync on raw streams, variants alternating sample by sample.
#include "multi_gpu_bench.hpp"

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/runtime/peer.hpp>

#include <chrono>

namespace cuasync::bench::multi_gpu {

namespace {

struct size_case {
  std::size_t bytes;
  int copies;  // per sample
  const char* label;
};

}  // namespace

void peer_copy_bench(report& rep, device_side& d0, device_side& d1) {
  const context_ref c0 = d0.rt->context(), c1 = d1.rt->context();
  const auto t0 = clock::now();
  runtime::enable_peer_access(c0, c1);
  const double first_us = us_since(t0);
  const auto t1 = clock::now();
  runtime::enable_peer_access(c1, c0);
  const double second_us = us_since(t1);
  const auto t2 = clock::now();
  runtime::enable_peer_access(c0, c1);
  rep.note("peer access enable (first pair, other direction, again)",
           std::to_string(first_us) + " us, " + std::to_string(second_us) + " us, " + std::to_string(us_since(t2)) +
               " us");
  const auto& drv = cuasync::detail::driver();
  for (const size_case& sc : {size_case{4u << 20, 50, "4 MiB"}, size_case{64u << 20, 12, "64 MiB"},
                              size_case{std::size_t{1} << 30, 3, "1 GiB"}}) {
    auto a = runtime::tracked_buffer::allocate(*d0.rt, d0.s, sc.bytes);
    auto b = runtime::tracked_buffer::allocate(*d1.rt, d1.s, sc.bytes);
    auto a2 = runtime::tracked_buffer::allocate(*d0.rt, d0.s, sc.bytes);
    auto b2 = runtime::tracked_buffer::allocate(*d1.rt, d1.s, sc.bytes);
    d0.s.synchronize();
    d1.s.synchronize();
    for (bool both : {false, true}) {
      std::vector<double> ours, raw;
      for (int sample = 0; sample < 12; ++sample) {
        {
          const auto t = clock::now();
          for (int i = 0; i < sc.copies; ++i) {
            runtime::copy_peer_async(d0.s, b, a);
            if (both) runtime::copy_peer_async(d1.s, a2, b2);
          }
          d0.s.synchronize();
          d1.s.synchronize();
          ours.push_back(gbps(double(sc.bytes) * sc.copies, us_since(t)));
        }
        {
          const auto t = clock::now();
          for (int i = 0; i < sc.copies; ++i) {
            drv.cuMemcpyPeerAsync(b.get(), c1.get(), a.get(), c0.get(), sc.bytes, d0.raw.get());
            if (both) drv.cuMemcpyPeerAsync(a2.get(), c0.get(), b2.get(), c1.get(), sc.bytes, d1.raw.get());
          }
          d0.raw.synchronize();
          d1.raw.synchronize();
          raw.push_back(gbps(double(sc.bytes) * sc.copies, us_since(t)));
        }
      }
      rep.add({.name = std::string("peer copy ") + (both ? "both directions (each) " : "0->1 ") + sc.label,
               .unit = "GB/s",
               .ours = summarize(ours),
               .baseline = summarize(raw),
               .baseline_name = "cuMemcpyPeerAsync",
               .lower_is_better = false,
               .target = ">= 0.98"});
    }
  }
}

}  // namespace cuasync::bench::multi_gpu
