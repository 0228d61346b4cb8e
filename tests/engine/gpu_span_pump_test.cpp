// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// GPU spans read by the engine's poller thread (engine/src/gpu_span_client.cpp) where the engine is linked: the spans
// come out as the collector's own thread made them (tests/driver/trace_gpu_span_test.cpp, a driver-only program,
// covers that thread), and no "cuasync trace" thread is started. On the simulated driver (hidden [.simulated] case,
// CTest engine_misuse_simulated), whose sim_sleep_ms kernel takes that long.
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/engine/poller.hpp>
#include <cuasync/trace/recorder.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"
#include "trace_recording.hpp"

#include <dirent.h>

#include <chrono>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;

namespace {
// The names of this process's threads (/proc/self/task/*/comm).
std::vector<std::string> thread_names() {
  std::vector<std::string> names;
  DIR* d = ::opendir("/proc/self/task");
  REQUIRE(d);
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  ::closedir(d);
  return names;
}
}  // namespace

TEST_CASE("with the engine linked, GPU spans are read by its poller thread and no collector thread starts",
          "[.simulated][engine][trace]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  module m = module::load(ctx, std::string_view(test::sim_sleep_ptx), "span_pump.ptx");
  const kernel_ref sleep = m.kernel("sim_sleep_ms");
  stream a = stream::create(ctx);
  trace::clear();
  trace::enable({.output = {}, .max_records = 1000});
  // 50 ms: the poller passes while it runs, and the second launch is issued before it ends (under TSan the second
  // call came 15 ms after the first's start, past a 10 ms kernel: it then starts at its own call, not at that end).
  launch(a, sleep, {.grid = 1, .block = 1}, 50u);
  launch(a, sleep, {.grid = 1, .block = 1}, 1u);  // behind it: starts at its end
  a.synchronize();
  const std::vector<trace::span> spans = test::gpu_launch_spans();
  const std::vector<std::string> names = thread_names();
  trace::disable();
  trace::clear();
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].duration_ns() >= 5'000'000);
  CHECK(spans[1].begin_ns == spans[0].end_ns);  // the stream's previous span's end, as the collector computes it
  for (const std::string& n : names) CHECK(n != "cuasync trace");
}

// A traced launch while the poller sleeps between its 50 µs span passes does not wake it (the pass comes anyway and
// a span's time is measured, not awaited): a futex wake per launch cost more than the launch. Parked with nothing
// armed, the poller is woken (the first span starts the passes).
TEST_CASE("traced launches while GPU spans are in flight do not wake the poller one by one",
          "[.simulated][engine][trace]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  module m = module::load(ctx, std::string_view(test::sim_sleep_ptx), "span_pump_wakeups.ptx");
  const kernel_ref sleep = m.kernel("sim_sleep_ms");
  stream a = stream::create(ctx), b = stream::create(ctx);
  trace::clear();
  trace::enable({.output = {}, .max_records = 10000});
  launch(a, sleep, {.grid = 1, .block = 1}, 200u);  // in flight for the whole loop: the passes keep running
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  constexpr int launches = 400;
  const std::uint64_t before = poller::instance().wakeups();
  for (int i = 0; i < launches; ++i) {
    launch(b, sleep, {.grid = 1, .block = 1}, 0u);
    if (i % 50 == 49) b.synchronize();
  }
  const std::uint64_t woken = poller::instance().wakeups() - before;
  a.synchronize();
  b.synchronize();
  const std::vector<trace::span> spans = test::gpu_launch_spans();
  trace::disable();
  trace::clear();
  INFO("poller woken " << woken << " times for " << launches << " traced launches");
  CHECK(woken < 10);  // 0 here; 50 when each launch woke a poller sleeping between passes
  CHECK(spans.size() == launches + 1);  // none lost
}
