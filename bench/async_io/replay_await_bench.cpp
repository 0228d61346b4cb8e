// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/async_io: what awaiting a replay through a replay_anchor (engine/replay_anchor.hpp) costs, against the raw
// way a framework learns that its replay finished: cuGraphLaunch, cuEventRecord, busy cuEventQuery.
//   1. per-replay round trip (launch -> resumed coroutine) of a graph [sleep_ns(T), mark], awaited with
//      async_wait_replay, against the raw launch of the same graph + a busy query of an event recorded after it;
//   2. what the anchor's two nodes (the bump kernel and the event record) add on the GPU: the same raw round trip
//      with the anchored graph against a graph of sleep_ns(T) alone.
// Samples of the two sides alternate (one of each in turn), so drift (clocks, other tenants) hits both alike.
// Usage: cuasync_replay_await_bench [output folder] [kernel µs, default 20]   (writes replay_await.json and .md)
#include <cuasync/async_io/async_replay.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/graph.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using cuasync::bench::stats;
using cuasync::bench::summarize;
using cuasync::bench::us_since;

namespace {

constexpr int samples = 5000, warmup = 200;

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

double raw_replay_us(const runtime::graph_exec& exec, stream_ref s, const event& ev) {
  const auto t0 = bench::clock::now();
  exec.launch(s);
  ev.record(s);
  while (ev.query_result() == CUDA_ERROR_NOT_READY) {
  }
  return us_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_replay_await_bench needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const std::string out = bench::output_dir(argc, argv);
  const unsigned long long kernel_ns = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20) * 1000;
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  kernel_ref sleep_k = test::kernels().kernel("sleep_ns");
  const launch_config one{};  // one block of one thread

  replay_anchor anchor;
  runtime::graph anchored = runtime::graph::capture(s, [&](stream_ref st) {
    launch(st, sleep_k, one, kernel_ns);
    anchor = replay_anchor::mark(st);
  });
  runtime::graph plain = runtime::graph::capture(s, [&](stream_ref st) { launch(st, sleep_k, one, kernel_ns); });
  const runtime::graph_exec anchored_exec = anchored.instantiate(), plain_exec = plain.instantiate();
  event ev = event::create(ctx);

  // 1. Alternated: awaited replay of the anchored graph, then the raw round trip of the same graph.
  std::vector<double> awaited, raw_anchored, raw_plain;
  awaited.reserve(samples);
  raw_anchored.reserve(samples);
  raw_plain.reserve(samples);
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < warmup + samples; ++i) {
          const std::uint64_t n = anchor.generation() + 1;  // every earlier replay of it has completed
          const auto t0 = bench::clock::now();
          anchored_exec.launch(s);
          co_await async_wait_replay(anchor, n);
          const double a = us_since(t0);
          const double r = raw_replay_us(anchored_exec, s, ev);
          const double p = raw_replay_us(plain_exec, s, ev);
          if (i < warmup) continue;
          awaited.push_back(a);
          raw_anchored.push_back(r);
          raw_plain.push_back(p);
        }
      },
      rethrow);
  io.run();

  bench::report rep("replay_await");
  rep.note("device", ctx.device().name());
  rep.note("graph", "sleep_ns(" + std::to_string(kernel_ns / 1000) + " us), then the anchor's mark (bump kernel + "
                    "external event record); samples alternate, " + std::to_string(samples) + " of each");
  rep.note("policy", "balanced (the default)");
  rep.add({.name = "replay round trip, awaited via anchor", .unit = "us", .ours = summarize(awaited),
           .baseline = summarize(raw_anchored), .baseline_name = "cuGraphLaunch + cuEventRecord + busy cuEventQuery",
           .lower_is_better = true, .target = "p50 <= raw + 6 us (the io wake-up)"});
  rep.add({.name = "the anchor's nodes on the GPU (raw round trips)", .unit = "us", .ours = summarize(raw_anchored),
           .baseline = summarize(raw_plain), .baseline_name = "the graph without the mark", .lower_is_better = true,
           .target = "a few us (one more kernel node)"});
  std::vector<double> overhead(awaited.size());
  for (std::size_t i = 0; i < awaited.size(); ++i) overhead[i] = awaited[i] - raw_anchored[i];
  const stats o = summarize(overhead);
  rep.note("await overhead per replay (awaited - raw, paired samples)",
           "p50 " + std::to_string(o.median) + " us, p99 " + std::to_string(o.p99) + " us");
  rep.write(out);
  return 0;
}
