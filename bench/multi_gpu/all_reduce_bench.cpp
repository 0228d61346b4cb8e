// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// All-reduce through cuasync (collectives on cuasync streams, tracked buffers, awaited through the engine) against
// raw NCCL calls on raw streams with the same communicators, variants alternating sample by sample.
#include "multi_gpu_bench.hpp"

#include <cuasync/collectives/async_collectives.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

namespace cuasync::bench::multi_gpu {

namespace {

namespace co = collectives;

void synchronize_all(const std::vector<device_side*>& sides, bool raw) {
  for (device_side* d : sides) (raw ? d->raw : d->s).synchronize();
}

void issue_ours(std::vector<co::communicator>& comms, const std::vector<device_side*>& sides,
                std::vector<runtime::tracked_buffer>& bufs) {
  co::group g;
  for (std::size_t k = 0; k < comms.size(); ++k)
    co::all_reduce(comms[k], bufs[k], bufs[k], co::data_type::float32, co::reduce_op::sum, sides[k]->s);
  g.end();
}

void issue_raw(std::vector<co::communicator>& comms, const std::vector<device_side*>& sides,
               std::vector<runtime::tracked_buffer>& bufs) {
  const auto& n = co::detail::nccl();
  n.group_start();
  for (std::size_t k = 0; k < comms.size(); ++k) {
    void* p = reinterpret_cast<void*>(bufs[k].get());
    n.all_reduce(p, p, bufs[k].size() / sizeof(float), static_cast<int>(co::data_type::float32),
                 static_cast<int>(co::reduce_op::sum), comms[k].native(), sides[k]->raw.get());
  }
  n.group_end();
}

std::vector<runtime::tracked_buffer> buffers(const std::vector<device_side*>& sides, std::size_t bytes) {
  std::vector<runtime::tracked_buffer> bufs;
  for (device_side* d : sides) {
    bufs.push_back(runtime::tracked_buffer::allocate(*d->rt, d->s, bytes));
    memset_async(d->s, bufs.back().span(), 0);
  }
  synchronize_all(sides, false);
  return bufs;
}

void bus_bandwidth(report& rep, std::vector<co::communicator>& comms, const std::vector<device_side*>& sides,
                   const std::string& tag, bool quick) {
  const int n = comms.front().size();
  const double bus_factor = 2.0 * (n - 1) / n;
  for (std::size_t mib : {1, 16, 64, 256, 1024}) {
    if (quick && mib != 16 && mib != 256) continue;
    const std::size_t bytes = mib << 20;
    auto bufs = buffers(sides, bytes);
    const int iters = mib <= 1 ? 50 : mib <= 16 ? 30 : mib <= 64 ? 16 : mib <= 256 ? 6 : 3;
    issue_ours(comms, sides, bufs);  // warm both paths
    issue_raw(comms, sides, bufs);
    synchronize_all(sides, false);
    synchronize_all(sides, true);
    std::vector<double> ours, raw;
    for (int sample = 0; sample < (quick ? 6 : 10); ++sample) {
      auto t = clock::now();
      for (int i = 0; i < iters; ++i) issue_ours(comms, sides, bufs);
      synchronize_all(sides, false);
      ours.push_back(bus_factor * gbps(double(bytes) * iters, us_since(t)));
      t = clock::now();
      for (int i = 0; i < iters; ++i) issue_raw(comms, sides, bufs);
      synchronize_all(sides, true);
      raw.push_back(bus_factor * gbps(double(bytes) * iters, us_since(t)));
    }
    rep.add({.name = "all-reduce bus bandwidth " + std::to_string(mib) + " MiB (" + tag + ")",
             .unit = "GB/s",
             .ours = summarize(ours),
             .baseline = summarize(raw),
             .baseline_name = "raw NCCL",
             .lower_is_better = false,
             .target = mib >= 16 ? ">= 0.98" : ""});
  }
}

// Closed loop of one 4-byte all-reduce: awaited through the engine against a busy cuStreamQuery.
void small_latency(report& rep, std::vector<co::communicator>& comms, const std::vector<device_side*>& sides,
                   const std::string& tag, bool quick) {
  auto bufs = buffers(sides, sizeof(float));
  const int rounds = quick ? 500 : 2000;
  std::vector<double> ours, raw;
  std::vector<co::rank_part> parts;
  for (std::size_t k = 0; k < comms.size(); ++k) parts.push_back({comms[k], sides[k]->s});
  boost::asio::io_context io;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        const auto& drv = cuasync::detail::driver();
        for (int i = 0; i < rounds + 50; ++i) {  // the first 50 of each are warm-up
          auto t = clock::now();
          issue_ours(comms, sides, bufs);
          co_await co::async_wait_collectives(parts);  // every rank of this process in one wait
          if (i >= 50) ours.push_back(us_since(t));
          t = clock::now();
          issue_raw(comms, sides, bufs);
          for (device_side* d : sides)
            while (drv.cuStreamQuery(d->raw.get()) == CUDA_ERROR_NOT_READY) {
            }
          if (i >= 50) raw.push_back(us_since(t));
        }
      },
      boost::asio::detached);
  io.run();
  rep.add({.name = "awaited 4 B all-reduce (" + tag + ")",
           .unit = "us",
           .ours = summarize(ours),
           .baseline = summarize(raw),
           .baseline_name = "raw NCCL + busy cuStreamQuery",
           .lower_is_better = true,
           .target = "<= raw + 2 us p50"});
}

}  // namespace

void all_reduce_bench(report& rep, std::vector<co::communicator>& comms, std::vector<device_side*> sides,
                      const std::string& tag, bool quick) {
  bus_bandwidth(rep, comms, sides, tag, quick);
  small_latency(rep, comms, sides, tag, quick);
}

}  // namespace cuasync::bench::multi_gpu
