// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Every completion token works with async_wait (on the host completion source, so this runs without a GPU).
#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/async_io/async_compile.hpp>
#include <cuasync/async_io/async_run_blocking.hpp>

#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <future>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::host_setup;

namespace {
const std::error_code fault{700, std::generic_category()};
}

TEST_CASE("use_awaitable: co_await returns, or throws cuda_error with the code", "[async_io]") {
  host_setup h;
  const auto ok = h.source.create(), bad = h.source.create();
  bool resumed = false;
  std::error_code caught;
  asio::co_spawn(
      h.io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(h.target(1, ok), asio::use_awaitable);
        resumed = true;
        try {
          co_await async_wait(h.target(1, bad), asio::use_awaitable);
        } catch (const cuda_error& e) {
          caught = e.code();
        }
      },
      asio::detached);
  h.source.complete(ok);
  h.source.complete(bad, fault);
  h.io.run();
  CHECK(resumed);
  CHECK(caught == fault);
}

TEST_CASE("use_future: the future becomes ready; get() throws cuda_error on failure", "[async_io]") {
  host_setup h;
  const auto ok = h.source.create(), bad = h.source.create();
  std::future<void> f1 = async_wait(h.io.get_executor(), h.target(1, ok), asio::use_future);
  std::future<void> f2 = async_wait(h.io.get_executor(), h.target(2, bad), asio::use_future);
  std::thread runner([&] { h.io.run(); });
  h.source.complete(ok);
  h.source.complete(bad, fault);
  CHECK_NOTHROW(f1.get());
  try {
    f2.get();
    FAIL("no exception");
  } catch (const cuda_error& e) {
    CHECK(e.code() == fault);
  }
  runner.join();
}

TEST_CASE("use_future without an io_context completes on the system executor", "[async_io]") {
  host_completion_source source;
  const auto t = source.create();
  std::future<void> f = async_wait(wait_target{&source, 1, 0, t, nullptr}, asio::use_future);
  CHECK(f.wait_for(20ms) == std::future_status::timeout);
  source.complete(t);
  CHECK(f.wait_for(10s) == std::future_status::ready);
  CHECK_NOTHROW(f.get());
}

TEST_CASE("deferred: the wait starts when the deferred operation is launched", "[async_io]") {
  host_setup h;
  const auto t = h.source.create();
  auto op = async_wait(h.io.get_executor(), h.target(1, t), asio::deferred);
  CHECK(h.service.stats().pending_operations == 0);
  std::error_code result{1, std::generic_category()};
  std::move(op)([&](std::error_code ec) { result = ec; });
  CHECK(h.service.stats().pending_operations == 1);
  h.source.complete(t);
  h.io.run();
  CHECK_FALSE(result);
}

TEST_CASE("detached, as_tuple, redirect_error and bound callbacks", "[async_io]") {
  host_setup h;
  const auto t1 = h.source.create(), t2 = h.source.create(), t3 = h.source.create(), t4 = h.source.create();
  async_wait(h.io.get_executor(), h.target(1, t1), asio::detached);
  std::error_code tuple_ec;
  boost::system::error_code redirected;
  bool callback = false, tuple_done = false, redirect_done = false;
  asio::co_spawn(
      h.io,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await async_wait(h.target(2, t2), asio::as_tuple(asio::use_awaitable));
        tuple_ec = ec;
        tuple_done = true;
        co_await async_wait(h.target(3, t3), asio::redirect_error(asio::use_awaitable, redirected));
        redirect_done = true;
      },
      asio::detached);
  async_wait(h.target(4, t4), asio::bind_executor(h.io, [&](std::error_code ec) {
               CHECK_FALSE(ec);
               callback = true;
             }));
  h.source.complete(t1);
  h.source.complete(t2, fault);
  h.source.complete(t3, fault);
  h.source.complete(t4);
  h.io.run();
  CHECK(tuple_done);
  CHECK(tuple_ec == fault);
  CHECK(redirect_done);
  CHECK(std::error_code(redirected) == fault);
  CHECK(callback);
  CHECK(h.source.live_tokens() == 0);
}

TEST_CASE("async_run_blocking runs the callable on a pool and completes on the caller's executor", "[async_io]") {
  asio::io_context io;
  const auto io_thread = std::this_thread::get_id();
  std::thread::id ran_on, resumed_on;
  int value = 0;
  std::string error;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        value = co_await async_run_blocking(
            [&] {
              ran_on = std::this_thread::get_id();
              return 41 + 1;
            },
            asio::use_awaitable);
        resumed_on = std::this_thread::get_id();
        try {
          co_await async_run_blocking([]() -> int { throw std::runtime_error("compile failed"); }, asio::use_awaitable);
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
      },
      asio::detached);
  io.run();
  CHECK(value == 42);
  CHECK(ran_on != io_thread);
  CHECK(resumed_on == io_thread);
  CHECK(error == "compile failed");
  std::future<void> f = async_run_blocking([] {}, asio::use_future);
  CHECK_NOTHROW(f.get());
}

TEST_CASE("async_compile compiles on the pool and resumes the coroutine on its io thread", "[async_io][nvrtc]") {
  asio::io_context io;
  const auto io_thread = std::this_thread::get_id();
  std::thread::id resumed_on;
  bool compiled = false, compile_error = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // Named locals, not temporaries such as `{}` inside the co_await expression: g++ 12 bitwise-copies class
        // temporaries there (valgrind: an SSO string of compile_options freed from inside the coroutine frame).
        jit::program good("k.cu", "extern \"C\" __global__ void k(int* p) { *p = 1; }");
        jit::program bad("bad.cu", "this is not CUDA");
        const jit::compile_options options;
        jit::compile_result r = co_await async_compile(std::move(good), 90, options, asio::use_awaitable);
        resumed_on = std::this_thread::get_id();
        compiled = r.program != nullptr;
        try {
          co_await async_compile(std::move(bad), 90, options, asio::use_awaitable);
        } catch (const std::exception&) {
          compile_error = true;
        }
      },
      asio::detached);
  io.run();
  CHECK(compiled);
  CHECK(resumed_on == io_thread);
  CHECK(compile_error);
}
