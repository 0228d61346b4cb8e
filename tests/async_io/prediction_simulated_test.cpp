// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Predicted ends on the simulated driver (hidden, [.simulated]: CTest async_io_misuse_simulated runs them there): a
// closed loop of awaited launches runs as fast with prediction on as with it off (a prediction that slept past the
// work's end once cost 2–6 ms an operation: one slow run stood for a key whose other runs were all found done at the
// first look, and those taught nothing), and work that became shorter than its estimate is found within a fraction
// of the wait, not at the old predicted end.
#include <cuasync/async_io.hpp>
#include <cuasync/async_io/completion_service.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <string_view>

using namespace cuasync;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_sleep_ms(.param .u32 ms) { ret; }
)";

using clock_type = std::chrono::steady_clock;

// The time `n` awaited launches of sim_sleep_ms(0) take back to back, one at a time, on a fresh io_context under `p`,
// after one of sim_sleep_ms(3): the same work key (arguments are not part of it), as a slow first run (a cold
// launch, a descheduled thread) would teach.
clock_type::duration closed_loop(const stream& s, kernel_ref sleep_ms, int n, const poll_policy& p) {
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(p);
  clock_type::duration took{};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_launch(s, sleep_ms, {.grid = 1, .block = 1}, std::uint32_t{3}, asio::use_awaitable);
        const auto t0 = clock_type::now();
        for (int i = 0; i < n; ++i)
          co_await async_launch(s, sleep_ms, {.grid = 1, .block = 1}, std::uint32_t{0}, asio::use_awaitable);
        took = clock_type::now() - t0;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  return took;
}

poll_policy with_prediction(bool on) {
  poll_policy p = poll_policy::balanced();
  p.predict = on;
  return p;
}
}  // namespace

TEST_CASE("a closed loop of awaited launches is as fast with prediction on as off", "[.simulated][predict]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  module m = module::load(rt->context(), std::string_view(sim_ptx), "prediction_sim.ptx");
  const kernel_ref sleep_ms = m.kernel("sim_sleep_ms");
  stream s = stream::create(rt->context());
  constexpr int n = 3000;
  // Alternated, the best of three each: the machine's load moves both alike.
  clock_type::duration off = clock_type::duration::max(), on = off;
  for (int round = 0; round < 3; ++round) {
    off = std::min(off, closed_loop(s, sleep_ms, n, with_prediction(false)));
    on = std::min(on, closed_loop(s, sleep_ms, n, with_prediction(true)));
  }
  const auto per_op = [](clock_type::duration d) { return std::chrono::duration<double, std::micro>(d).count() / n; };
  WARN("closed loop, µs an operation: prediction off " << per_op(off) << ", on " << per_op(on));
  // The defect slept ~3 ms an operation (the slow first run's end, never corrected: the later runs, done at the first
  // look, taught nothing); the bound leaves room for a loaded machine, not for a sleep per operation.
  CHECK(on <= 2 * off + n * 20us);
}

TEST_CASE("work that became shorter than its estimate is found within a fraction of the wait",
          "[.simulated][predict]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  module m = module::load(rt->context(), std::string_view(sim_ptx), "prediction_sim.ptx");
  const kernel_ref sleep_ms = m.kernel("sim_sleep_ms");
  stream s = stream::create(rt->context());
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(with_prediction(true));
  clock_type::duration after_change{};
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // The same launch (one work key: the argument is not part of it) takes 40 ms four times, then 1 ms.
        for (int i = 0; i < 4; ++i)
          co_await async_launch(s, sleep_ms, {.grid = 1, .block = 1}, std::uint32_t{40}, asio::use_awaitable);
        const auto t0 = clock_type::now();
        co_await async_launch(s, sleep_ms, {.grid = 1, .block = 1}, std::uint32_t{1}, asio::use_awaitable);
        after_change = clock_type::now() - t0;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  const double ms = std::chrono::duration<double, std::milli>(after_change).count();
  WARN("a 1 ms launch after 40 ms ones: " << ms << " ms");
  // Slept to the old estimate it would take ~40 ms (or the 10 ms fault check); the checks at a quarter of its age
  // find it at ~1.25 ms. Room for a loaded machine.
  CHECK(after_change < 8ms);
}
