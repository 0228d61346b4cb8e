// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/driver/pdl: programmatic dependent launch (launch_config::dependent_launch) on a chain of 1,000 short
// kernels, against the same chain in plain stream order, in the same run. Each kernel (`chain_add_one`, the test
// kernels) waits on the one before it (griddepcontrol.wait) and then lets the next start. The chain is enqueued
// behind a closed gate, so the time between the events around it is the GPU's alone, not the host's enqueue rate;
// samples of the two sides alternate. Every chain's result is checked (each element = 1,000 more).
#include <cuasync/driver.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;
namespace b = cuasync::bench;

int main(int argc, char** argv) {
  const std::string out = b::output_dir(argc, argv);
  context_ref ctx = test::ctx();
  const auto& props = ctx.device().properties();
  b::report rep("pdl");
  rep.note("device", props.name);
  rep.note("driver", driver_version_string());
  const kernel_ref step = test::kernels().kernel("chain_add_one");
  rep.note("chain_add_one waits on its grid dependency", step.waits_on_grid_dependency() ? "yes" : "no");
  if (!step.waits_on_grid_dependency()) {
    std::fprintf(stderr, "pdl bench: chain_add_one's image shows no griddepcontrol.wait: PDL would not be set\n");
    return 1;
  }
  stream s = stream::create(ctx);
  event start = event::create(ctx, {.timing = true}), end = event::create(ctx, {.timing = true});
  constexpr int chain = 1000, samples = 21;
  const int sms = props.multiprocessor_count;

  // One chain: gate closed, start event, 1,000 launches, end event, gate opened; GPU microseconds per kernel. The
  // driver takes about 1,021 launches on a held stream before an enqueue blocks (h200-queue-depth-probe.txt): should
  // it block sooner, a watcher opens the gate after 500 ms, and the sample is counted as not gated.
  int ungated = 0;
  auto run_chain = [&](device_buffer& d, int elements, int blocks, bool dependent) {
    test::gate g;
    g.close(s);
    start.record(s);
    std::atomic<bool> enqueued{false}, opened_late{false};
    std::thread watcher([&] {
      const auto deadline = b::clock::now() + std::chrono::milliseconds(500);
      while (!enqueued.load() && b::clock::now() < deadline) std::this_thread::yield();
      opened_late = !enqueued.load();
      g.open();
    });
    for (int k = 0; k < chain; ++k)
      launch(s, step, {.grid = static_cast<unsigned>(blocks), .block = 256, .dependent_launch = dependent},
             d.data<int>(), elements);
    end.record(s);
    enqueued = true;
    watcher.join();
    s.synchronize();
    ungated += opened_late.load();
    return 1000.0 * event::elapsed_ms(start, end) / chain;
  };
  bool all_correct = true;
  for (int blocks : {1, sms, 4 * sms}) {
    const int elements = blocks * 256;
    device_buffer d = device_buffer::allocate(ctx, elements * sizeof(int));
    memset_async(s, d.span(), 0);
    std::vector<double> pdl, plain;
    run_chain(d, elements, blocks, true);  // warm-up
    run_chain(d, elements, blocks, false);
    for (int i = 0; i < samples; ++i) {
      pdl.push_back(run_chain(d, elements, blocks, true));
      plain.push_back(run_chain(d, elements, blocks, false));
    }
    std::vector<int> host(elements);
    copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
    s.synchronize();
    const int expected = chain * (2 + 2 * samples);
    const bool correct = std::count(host.begin(), host.end(), expected) == elements;
    all_correct = all_correct && correct;
    rep.add({.name = "chain of 1000 kernels, " + std::to_string(blocks) + " blocks of 256" +
                     (correct ? "" : " (WRONG RESULT)"),
             .unit = "us/kernel (GPU)",
             .ours = b::summarize(pdl),
             .baseline = b::summarize(plain),
             .baseline_name = "same chain without PDL",
             .target = "< 1"});
  }
  rep.note("results", all_correct ? "every chain correct" : "A CHAIN WAS WRONG");
  rep.note("samples whose enqueue outran the gate (opened after 500 ms)", std::to_string(ungated));
  rep.write(out);
  return all_correct ? 0 : 1;
}
