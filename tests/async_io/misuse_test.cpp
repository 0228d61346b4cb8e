// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Awaited operations used the way framework code gets them wrong: destroyed streams, overlapping copies, a pipeline
// cancelled by a timeout. Found by a review on the simulated driver. The cases that use a destroyed stream's handle are
// hidden ([.simulated]): CTest runs them on the simulated libcuda only (with a real driver such a handle is undefined
// behaviour); the others run wherever there is a driver.
#include <cuasync/async_io.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>

using namespace cuasync;
namespace asio = boost::asio;

namespace {
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}
}  // namespace

TEST_CASE("an awaited copy on a destroyed stream fails in the coroutine, naming the caller's line", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  device_buffer a = device_buffer::allocate(rt->context(), 64), b = device_buffer::allocate(rt->context(), 64);
  stream_ref dead;
  {
    stream tmp = stream::create(rt->context());
    dead = tmp;
  }
  asio::io_context io;
  std::string caught;
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await async_copy(dead, b.span(), a.span());
        } catch (const cuda_error& e) {
          caught = e.what();
        }
        finished = true;
      },
      rethrow);
  REQUIRE_NOTHROW(io.run());  // it came out of run() before: past the coroutine's try
  CHECK(finished);
  CHECK_THAT(caught, Catch::Contains("CUDA_ERROR_INVALID_HANDLE"));
  CHECK_THAT(caught, Catch::Contains("misuse_test.cpp"));  // the caller's line, not the library's
}

TEST_CASE("a failed start of async_wait names the failed call and the caller's line", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  stream_ref dead;
  {
    stream tmp = stream::create(rt->context());
    dead = tmp;
  }
  asio::io_context io;
  std::string caught;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        try {
          co_await async_wait(dead, asio::use_awaitable);
        } catch (const cuda_error& e) {
          caught = e.what();
        }
      },
      rethrow);
  io.run();
  // The failed call's own error (the record could not be made: nothing was awaited yet), at the caller's line.
  CHECK_THAT(caught, Catch::Contains("CUDA_ERROR_INVALID_HANDLE"));
  CHECK_THAT(caught, !Catch::Contains("the GPU work awaited"));
  CHECK_THAT(caught, Catch::Contains("misuse_test.cpp"));
}

TEST_CASE("operations waiting for admission on a stream destroyed meanwhile fail, never run on its successor",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = runtime::device_runtime::for_device(0);
  auto pool = event_pool::for_context(rt->context());
  const admission_limits saved = pool->get_admission_limits();
  pool->set_admission_limits({.per_stream = 1, .per_context = 500});
  device_buffer a = device_buffer::allocate(rt->context(), 1 << 20), b = device_buffer::allocate(rt->context(), 1 << 20);
  asio::io_context io;
  int ok = 0, refused = 0, other = 0;
  std::optional<stream> s(stream::create(rt->context()));
  // Tens of milliseconds of work ahead on the stream (the simulator's device thread runs it): the first copy is
  // admitted and stays in flight behind it while the others start and wait for its place.
  device_buffer ahead = device_buffer::allocate(rt->context(), std::size_t{512} << 20);
  memset_async(*s, ahead.span(), 1);
  for (int i = 0; i < 8; ++i)
    asio::co_spawn(
        io,
        [&, ref = stream_ref(*s)]() -> asio::awaitable<void> {
          try {
            co_await async_copy(ref, b.span(), a.span());
            ++ok;
          } catch (const cuda_error& e) {
            (std::string(e.what()).find("destroyed while the operation waited") != std::string::npos ? refused : other)++;
          }
        },
        rethrow);
  io.poll();  // every start: one admitted, seven waiting for a place
  s.reset();  // destroyed with its operations waiting
  stream successor = stream::create(rt->context());  // may take the handle
  io.run();
  pool->set_admission_limits(saved);
  CHECK(ok == 1);
  CHECK(refused == 7);
  CHECK(other == 0);
  successor.synchronize();
}

TEST_CASE("an awaited copy between overlapping device ranges is refused in the call", "[async_io][gpu]") {
  auto rt = runtime::device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  device_buffer b = device_buffer::allocate(rt->context(), 4096);
  try {
    auto f = async_copy(s, b.span().subspan(0, 2048), b.span().subspan(1024, 2048), asio::use_future);
    FAIL("an overlapping copy was accepted");
  } catch (const cuda_error& e) {
    CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
    CHECK_THAT(std::string(e.what()), Catch::Contains("overlap"));
  }
}

TEST_CASE("a pipeline run cancelled by a timeout leaves its running slots in flight for the next run",
          "[async_io][gpu]") {
  using namespace asio::experimental::awaitable_operators;
  auto rt = runtime::device_runtime::for_device(0);
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  runtime::slot_pipeline p(*rt, {.slots = 3, .input_bytes = 64, .output_bytes = 64});
  bool refilled_early = false;
  auto pre = [&](std::size_t, runtime::pipeline_slot& sl) {
    if (!p.done_event(sl.index).query()) refilled_early = true;  // its previous batch still on the GPU
  };
  auto gpu = [&](std::size_t, runtime::pipeline_slot& sl) {
    launch(sl.stream, sleep, launch_config{.grid = 1, .block = 1}, 100'000'000ull);  // 100 ms
    memset_async(sl.stream, sl.output_device.span(), 0);  // the output copied back is written (initcheck)
  };
  auto post = [](std::size_t, runtime::pipeline_slot&) {};
  asio::io_context io;
  bool timed_out = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer t(io, std::chrono::milliseconds(50));
        auto r = co_await (async_run(p, 20, pre, gpu, post) || t.async_wait(asio::use_awaitable));
        timed_out = r.index() == 1;
        co_await async_run(p, 6, pre, gpu, post);  // refills only slots whose batch is done
      },
      rethrow);
  io.run();
  CHECK(timed_out);
  CHECK_FALSE(refilled_early);
}
