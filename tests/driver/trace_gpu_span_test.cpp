// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GPU spans with one timing event per operation (driver/src/gpu_span_collector.hpp): a span's start is its stream's
// previous span's end, or its call's start when the stream was idle, and after a wait for another stream (a marker
// recorded by stream_ref::wait) no earlier than the wait's end. On the simulated driver (hidden [.simulated] case,
// CTest driver_misuse_simulated), whose sim_sleep_ms kernel takes that long.
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/trace/recorder.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"
#include "trace_recording.hpp"

#include <string_view>
#include <vector>

using namespace cuasync;


TEST_CASE("a GPU span starts at its stream's previous span's end, or after the wait for another stream",
          "[.simulated][driver][trace]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  module m = module::load(ctx, std::string_view(test::sim_sleep_ptx), "trace_spans.ptx");
  const kernel_ref sleep = m.kernel("sim_sleep_ms");
  stream a = stream::create(ctx), b = stream::create(ctx);
  event done_on_a = event::create(ctx);
  trace::clear();
  trace::enable({.output = {}, .max_records = 1000});
  launch(a, sleep, {.grid = 1, .block = 1}, 20u);  // 20 ms
  launch(a, sleep, {.grid = 1, .block = 1}, 1u);   // queued behind it: starts at its end, not at its call
  done_on_a.record(a);
  b.wait(done_on_a);
  launch(b, sleep, {.grid = 1, .block = 1}, 1u);   // b was idle, but waits for a: starts after a's second kernel
  a.synchronize();
  b.synchronize();
  const std::vector<trace::span> spans = test::gpu_launch_spans();  // before disable(): spans converted after it are dropped
  trace::disable();
  trace::clear();
  for (const trace::span& s : spans) UNSCOPED_INFO(s.name << " " << s.begin_ns << " .. " << s.end_ns);
  REQUIRE(spans.size() == 3);
  const trace::lane lane_a = spans[0].lane;
  for (const trace::span& s : spans) CHECK(s.begin_ns <= s.end_ns);
  CHECK(spans[0].duration_ns() >= 15'000'000);  // the 20 ms kernel: its call's start to its end
  CHECK(spans[1].lane == lane_a);
  CHECK(spans[1].begin_ns == spans[0].end_ns);  // the first kernel's end, exactly
  CHECK(spans[1].duration_ns() < 15'000'000);   // not the 20 ms it waited behind the first
  CHECK_FALSE(spans[2].lane == lane_a);
  CHECK(spans[2].begin_ns >= spans[1].end_ns - 100'000);  // after the wait (the marker's end, within clock error)
  CHECK(spans[2].duration_ns() < 15'000'000);
}
