// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Awaited operations on a stream being captured into a CUDA graph, on the simulated driver (hidden [.simulated]:
// CTest async_io_misuse_simulated): refused before anything is enqueued, naming why, and the capture goes on; what is
// enqueued without awaiting becomes graph nodes that the graph's launch runs.
#include <cuasync/async_io.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/launch.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <catch2/catch.hpp>

#include "sim_capture.hpp"
#include "simulated_driver.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;
using cuasync::detail::driver;
using Catch::Contains;

TEST_CASE("an awaited operation on a capturing stream is refused, naming why, and the capture goes on",
          "[.simulated][capture]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  context_ref ctx = rt->context();
  module m = module::load(ctx, std::string_view(test::sim_u32_ptx), "capture_async.ptx");
  device_buffer b = device_buffer::allocate(ctx, 4 * sizeof(std::uint32_t));
  stream s = stream::create(ctx);
  memset_async(s, b.span(), 0);
  s.synchronize();
  REQUIRE(driver().cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  asio::io_context io;
  std::string refused;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await async_launch(s, m.kernel("sim_add_u32"), {.grid = 1, .block = 4}, b.data<std::uint32_t>(), 4u,
                                1u);
        } catch (const std::exception& e) {
          refused = e.what();
        }
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  CHECK_THAT(refused, Contains("awaiting inside a capture") && Contains("being captured"));
  CHECK(test::capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  launch(s, m.kernel("sim_add_u32"), {.grid = 1, .block = 4}, b.data<std::uint32_t>(), 4u, 3u);  // a node
  CHECK(test::capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g = nullptr;
  REQUIRE(driver().cuStreamEndCapture(s.get(), &g) == CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  const scoped_context current(ctx);  // the driver instantiates in the current context
  REQUIRE(driver().cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
  for (int i = 0; i < 2; ++i) REQUIRE(driver().cuGraphLaunch(e, s.get()) == CUDA_SUCCESS);
  std::array<std::uint32_t, 4> out{};
  copy_async(s, std::span<std::uint32_t>(out), b.span());
  s.synchronize();
  CHECK(out == std::array<std::uint32_t, 4>{6, 6, 6, 6});  // the refused launch enqueued nothing
  driver().cuGraphExecDestroy(e);
  driver().cuGraphDestroy(g);
}

TEST_CASE("a tracked buffer handed between two streams inside a capture forks and joins it, and the graph replays it",
          "[.simulated][capture]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  context_ref ctx = rt->context();
  module m = module::load(ctx, std::string_view(test::sim_u32_ptx), "capture_handoff.ptx");
  stream a = stream::create(ctx), b = stream::create(ctx);
  pinned_buffer host = pinned_buffer::allocate(ctx, 4 * sizeof(std::uint32_t));
  std::span<std::uint32_t> out = host.as_span<std::uint32_t>();
  std::optional<runtime::tracked_buffer> held = runtime::tracked_buffer::allocate(*rt, a, 4 * sizeof(std::uint32_t));
  runtime::tracked_buffer& x = *held;
  a.synchronize();
  const launch_config cfg{.grid = 1, .block = 4};
  REQUIRE(driver().cuStreamBeginCapture(a.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  runtime::launch(a, m.kernel("sim_fill_u32"), cfg, runtime::writes(x), 4u, 1u);
  CHECK(test::capture_status(a) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  runtime::launch(b, m.kernel("sim_add_u32"), cfg, runtime::read_writes(x), 4u, 2u);  // b waits for a: joins
  CHECK(test::capture_status(a) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(test::capture_status(b) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  runtime::launch(a, m.kernel("sim_add_u32"), cfg, runtime::read_writes(x), 4u, 4u);  // a waits for b: joined back
  copy_async(a, out, x.span());
  CHECK(test::capture_status(a) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g = nullptr;
  REQUIRE(driver().cuStreamEndCapture(a.get(), &g) == CUDA_SUCCESS);
  CHECK(test::capture_status(b) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraphExec e = nullptr;
  const scoped_context current(ctx);  // the driver instantiates in the current context
  REQUIRE(driver().cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i) {
    std::fill(out.begin(), out.end(), 0u);
    REQUIRE(driver().cuGraphLaunch(e, a.get()) == CUDA_SUCCESS);
    a.synchronize();
    CHECK(std::vector(out.begin(), out.end()) == std::vector<std::uint32_t>{7, 7, 7, 7});
  }
  driver().cuGraphExecDestroy(e);
  driver().cuGraphDestroy(g);
  // After the capture the buffer's uses in it stand for no work of their own (the graph's launches are ordered by
  // whoever launches it): its free waits for none of them, and reports nothing.
  held.reset();
  a.synchronize();
  CHECK_FALSE(ctx.take_deferred_error());
}
