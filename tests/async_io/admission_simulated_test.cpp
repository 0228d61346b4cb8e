// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Operations that wait for admission, on the simulated driver (hidden, [.simulated]: CTest async_io_misuse_simulated
// runs them there): a stream held by a gate kernel keeps its places taken, the rest of the awaited launches wait, and
// once the gate opens they are admitted in their order through the completion FIFO (not one posted handler each), each
// enqueued once, while a timer on the same io thread keeps its turns.
#include <cuasync/async_io.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

// A stream of device 0 with `per_stream` admission places, the gate and counter kernels, the gate's flag (closed) and
// the counter (zeroed on the stream). The context's limits are restored at the end.
struct gated_stream {
  std::shared_ptr<runtime::device_runtime> rt = runtime::device_runtime::for_device(0);
  context_ref ctx = rt->context();
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  admission_limits saved = pool->get_admission_limits();
  module m = module::load(ctx, std::string_view(sim_ptx), "admission_sim.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  device_buffer counter = device_buffer::allocate(ctx, sizeof(std::uint32_t));
  stream s = stream::create(ctx);
  explicit gated_stream(std::uint32_t per_stream) {
    pool->set_admission_limits({.per_stream = per_stream, .per_context = 500});
    *flag.data<unsigned>() = 0;
    memset_async(s, counter.span(), 0);
  }
  ~gated_stream() { pool->set_admission_limits(saved); }
  void open_gate() { std::atomic_ref(*flag.data<unsigned>()).store(1); }
};
}  // namespace

TEST_CASE("launches waiting for admission behind a held stream are admitted in order once it frees, timers between",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  gated_stream g(4);
  std::shared_ptr<event_pool>& pool = g.pool;
  pinned_buffer& flag = g.flag;
  module& m = g.m;
  device_buffer& counter = g.counter;
  stream& s = g.s;
  launch(s, m.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>());  // holds s until opened

  constexpr int operations = 200;
  asio::io_context io;
  std::vector<int> completed;
  std::atomic<std::uint32_t> most_waiting{0};
  for (int i = 0; i < operations; ++i)
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          co_await async_launch(s, m.kernel("sim_add_u32"), {.grid = 1, .block = 1}, counter.data<std::uint32_t>(),
                                1u, 1u);
          completed.push_back(i);
        },
        rethrow);
  int ticks = 0;
  asio::steady_timer timer(io);
  std::function<void()> tick = [&] {
    most_waiting = std::max(most_waiting.load(), pool->waiting_for_admission());
    if (++ticks == 20) g.open_gate();  // the gate opens after ~20 ms
    if (completed.size() == operations) return;
    timer.expires_after(1ms);
    timer.async_wait([&](boost::system::error_code) { tick(); });
  };
  tick();
  io.run();

  REQUIRE(completed.size() == operations);
  for (int i = 0; i < operations; ++i) REQUIRE(completed[i] == i);  // one stream: admitted and completed in order
  CHECK(most_waiting >= operations - 4);  // all but the stream's places waited
  std::uint32_t total = 0;
  copy_async(s, std::span(&total, 1), counter.span());
  s.synchronize();
  CHECK(total == operations);  // each admitted operation enqueued its launch once
  CHECK(pool->admitted() == 0);
  CHECK(pool->waiting_for_admission() == 0);
}

TEST_CASE("an operation issued while an earlier one's granted place waits to be enqueued does not overtake it",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  // Two places on the stream, both taken by launches behind a gate; A waits. The gate opens: both complete in one
  // pass, A is granted one place and queued to be enqueued on the io thread, and a second place is free. B, issued on
  // the io thread before A's enqueue runs, must not take that free place past A (it would run first on the stream,
  // against call order): it waits behind A.
  gated_stream g(2);
  std::shared_ptr<event_pool>& pool = g.pool;
  pinned_buffer& flag = g.flag;
  module& m = g.m;
  device_buffer& counter = g.counter;
  stream& s = g.s;

  asio::io_context io;
  std::vector<std::string> completed;
  auto issue = [&](std::string name, bool gated) {
    asio::co_spawn(
        io,
        [&, name, gated]() -> asio::awaitable<void> {
          if (gated)
            co_await async_launch(s, m.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>());
          else
            co_await async_launch(s, m.kernel("sim_add_u32"), {.grid = 1, .block = 1},
                                  counter.data<std::uint32_t>(), 1u, 1u);
          completed.push_back(name);
        },
        rethrow);
  };
  issue("X", true);  // holds both places until the flag opens
  issue("Y", true);
  issue("A", false);  // waits for a place
  asio::post(io, [&] {
    REQUIRE(pool->waiting_for_admission() == 1);  // A
    g.open_gate();
    // The poller completes X and Y and grants A its place; A's enqueue is queued behind this handler.
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (pool->waiting_for_admission() != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    REQUIRE(pool->waiting_for_admission() == 0);
    // Initiated here, in this handler (a callback token starts at the call), before A's queued enqueue runs.
    async_launch(s, m.kernel("sim_add_u32"), {.grid = 1, .block = 1}, counter.data<std::uint32_t>(), 1u, 1u,
                 asio::bind_executor(io, [&](std::error_code ec) {
                   CHECK(!ec);
                   completed.push_back("B");
                 }));
  });
  io.run();
  REQUIRE(completed.size() == 4);
  CHECK(completed[2] == "A");
  CHECK(completed[3] == "B");
  CHECK(pool->admitted() == 0);
}
