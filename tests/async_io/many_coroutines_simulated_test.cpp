// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Many coroutines over many streams, some behind held streams, on the simulated driver (hidden, [.simulated]): the
// io thread never makes a pinned allocation (the event pool's host words grow ahead of need, off that thread) while
// thousands of operations are in flight and thousands more wait for admission, and every result is right. The io
// thread's longest timer gap is printed, not checked: on a 2-core machine it is the scheduler's (the simulated device
// and the poller share the cores); bench/async_io/cold_paths_probe.cpp measures it on a GPU.
#include <cuasync/async_io.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "gap_meter.hpp"
#include "simulated_driver.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
.visible .entry sim_fill_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}
}  // namespace

TEST_CASE("many coroutines over 64 streams, 16 held: no pinned allocation on the io thread, every result right",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  constexpr int coroutines = 20'000, streams_n = 64, held_streams = 16;
  auto rt = runtime::device_runtime::for_device(0);
  context_ref ctx = rt->context();
  module m = module::load(ctx, std::string_view(sim_ptx), "many_coroutines_sim.ptx");
  kernel_ref gate = m.kernel("sim_wait_u32"), fill = m.kernel("sim_fill_u32"), add = m.kernel("sim_add_u32");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 0;
  std::vector<stream> ss;
  for (int i = 0; i < streams_n; ++i) ss.push_back(stream::create(ctx));
  device_buffer dev = device_buffer::allocate(ctx, coroutines * sizeof(std::uint32_t));
  pinned_buffer out = pinned_buffer::allocate(ctx, coroutines * sizeof(std::uint32_t));
  for (int i = 0; i < held_streams; ++i) launch(ss[i], gate, {.grid = 1, .block = 1}, flag.data<unsigned>());
  auto pool = event_pool::for_context(ctx);
  // Room for 2,000 operations in flight: the pool's events outgrow a slab of host words several times over.
  const admission_limits saved = pool->get_admission_limits();
  pool->set_admission_limits({.per_stream = 64, .per_context = 2000});
  struct restore {
    event_pool& p;
    admission_limits l;
    ~restore() { p.set_admission_limits(l); }
  } restore_limits{*pool, saved};
  asio::io_context io;
  test::gap_meter gaps(io);
  int finished = 0;
  std::uint32_t most_waiting = 0;
  long allocs_before = -1, allocs_after = -1;
  const std::uint64_t words_before = cuda_completion_source::instance().host_word_waits();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        allocs_before = test::simulated_pinned_allocations_here();
        for (int i = 0; i < coroutines; ++i) {
          asio::co_spawn(
              io,
              [&, i]() -> asio::awaitable<void> {
                stream_ref s = ss[i % streams_n];
                std::uint32_t* p = dev.data<std::uint32_t>() + i;
                co_await async_launch(s, fill, {.grid = 1, .block = 1}, p, 1u, std::uint32_t(i));
                co_await async_launch(s, add, {.grid = 1, .block = 1}, p, 1u, 7u);
                co_await async_copy(s, out.bytes().subspan(i * sizeof(std::uint32_t), sizeof(std::uint32_t)),
                                    device_span{dev.get() + i * sizeof(std::uint32_t), sizeof(std::uint32_t)});
                most_waiting = std::max(most_waiting, pool->waiting_for_admission());
                if (++finished == coroutines) {
                  allocs_after = test::simulated_pinned_allocations_here();
                  gaps.stop();
                }
              },
              rethrow);
          if (i % 25 == 24) co_await asio::post(io, asio::use_awaitable);
          if (i == coroutines / 2) std::atomic_ref(*flag.data<unsigned>()).store(1);
        }
      },
      rethrow);
  const auto t0 = std::chrono::steady_clock::now();
  gaps.start();
  io.run();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("many coroutines (simulated): longest io gap %.3f ms over %d ticks, %.1f ms in all, most waiting %u, "
              "pinned allocations on the io thread %ld, events %zu, waits seen by a host word %llu\n",
              gaps.longest_ms(), gaps.ticks(), ms, most_waiting, allocs_after - allocs_before, pool->created(),
              static_cast<unsigned long long>(cuda_completion_source::instance().host_word_waits() - words_before));
  REQUIRE(finished == coroutines);
  CHECK(allocs_after - allocs_before == 0);
  // The held streams' operations alone held all their places until the gate opened: two slabs' words were needed.
  CHECK(pool->created() >= std::size_t{held_streams} * 64);
  std::uint32_t wrong = 0;
  for (int i = 0; i < coroutines; ++i) wrong += out.data<std::uint32_t>()[i] != std::uint32_t(i) + 7;
  CHECK(wrong == 0);
}
