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

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <string_view>
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
}  // namespace

TEST_CASE("launches waiting for admission behind a held stream are admitted in order once it frees, timers between",
          "[.simulated]") {
  auto rt = runtime::device_runtime::for_device(0);
  const context_ref ctx = rt->context();
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  const admission_limits saved = pool->get_admission_limits();
  pool->set_admission_limits({.per_stream = 4, .per_context = 500});
  module m = module::load(ctx, std::string_view(sim_ptx), "admission_sim.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 0;
  device_buffer counter = device_buffer::allocate(ctx, sizeof(std::uint32_t));
  stream s = stream::create(ctx);
  memset_async(s, counter.span(), 0);
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
    if (++ticks == 20) std::atomic_ref(*flag.data<unsigned>()).store(1);  // the gate opens after ~20 ms
    if (completed.size() == operations) return;
    timer.expires_after(1ms);
    timer.async_wait([&](boost::system::error_code) { tick(); });
  };
  tick();
  io.run();
  pool->set_admission_limits(saved);

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
