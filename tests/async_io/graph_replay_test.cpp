// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// async_launch_graph (async_graph.hpp): each replay of a captured graph awaited once, never early, none lost; a
// fault in replay k reaches that replay's awaiter (in a child process: the context is unusable afterwards); an empty
// graph_exec refused at the call.
#include <cuasync/async_io/async_graph.hpp>

#include "child_process.hpp"
#include "gpu.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdio>

namespace asio = boost::asio;
using namespace cuasync;

namespace {
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}
}  // namespace

TEST_CASE("async_launch_graph refuses an empty graph_exec at the call", "[async_io][graph]") {
  const runtime::graph_exec empty;
  CHECK_THROWS_WITH(async_launch_graph(empty, stream_ref{}, [](std::error_code) {}),
                    Catch::Contains("cuasync::async_launch_graph") && Catch::Contains("the graph_exec is empty"));
}

TEST_CASE("each replay of a captured graph is awaited once and never early, 10,000 replays",
          "[async_io][graph][gpu]") {
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  pinned_buffer counter = pinned_buffer::allocate(ctx, sizeof(int));
  *counter.data<int>() = 0;
  const launch_config one{.grid = 1, .block = 1};
  // A replay: 5 µs on the GPU, then the count. An await that completed before its replay ended would see the
  // count of the replay before.
  runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
    launch(st, test::kernels().kernel("sleep_ns"), one, 5'000ull);
    launch(st, test::kernels().kernel("add_value"), one, counter.data<int>(), 1, 1);
  });
  const runtime::graph_exec exec = g.instantiate();
  constexpr int replays = 10'000;
  int early = 0, completed = 0;
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < replays; ++i) {
          co_await async_launch_graph(exec, s);
          ++completed;
          if (std::atomic_ref(*counter.data<int>()).load() != i + 1) ++early;
        }
      },
      rethrow);
  io.run();
  CHECK(completed == replays);
  CHECK(early == 0);
  CHECK(*counter.data<int>() == replays);
}

TEST_CASE("graph replay fault child", "[.graph_replay_fault_child]") {
  CUASYNC_CHILD_ONLY();
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  pinned_buffer out = pinned_buffer::allocate(ctx, sizeof(int));
  runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
    launch(st, test::kernels().kernel("write_to"), launch_config{.grid = 1, .block = 1}, out.data<int>(), 0);
  });
  runtime::graph_exec exec = g.instantiate();
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 6; ++i) {
          // Replay 3 writes through an address nothing is mapped at.
          int* target = i == 3 ? reinterpret_cast<int*>(0x10) : out.data<int>();
          exec.set_kernel_arguments(0, target, i);
          try {
            co_await async_launch_graph(exec, s);
            std::printf("CHILD replay %d: ok, wrote %d\n", i, std::atomic_ref(*out.data<int>()).load());
          } catch (const cuda_error& e) {
            std::printf("CHILD replay %d: %s\n", i, e.code().message().c_str());
            co_return;  // the context is unusable from here
          }
        }
      },
      rethrow);
  io.run();
  std::printf("CHILD done\n");
}

TEST_CASE("a fault in one replay of a graph reaches that replay's awaiter", "[async_io][graph][fault][gpu]") {
  auto r = test::run_child({"graph replay fault child"}, {}, std::chrono::seconds(60));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  for (int i = 0; i < 3; ++i)
    CHECK_THAT(r.output, Catch::Contains("CHILD replay " + std::to_string(i) + ": ok, wrote " + std::to_string(i)));
  CHECK_THAT(r.output, Catch::Contains("CHILD replay 3: CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK_THAT(r.output, !Catch::Contains("CHILD replay 4"));
  CHECK_THAT(r.output, Catch::Contains("CHILD done"));
}
