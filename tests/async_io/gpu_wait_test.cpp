// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// async_io on the GPU: every token type, many concurrent coroutines, cancellation while a kernel runs, an io thread
// that is never blocked.
#include <cuasync/async_io.hpp>
#include <cuasync/engine/event_pool.hpp>

#include "gpu.hpp"
#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <functional>
#include <future>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::eventually;

namespace {
const launch_config one{.grid = 1, .block = 1};
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("every completion token awaits GPU work, and none completes before it", "[async_io][gpu][concurrent]") {
  asio::io_context io;
  stream s = stream::create(test::ctx());
  test::gate g;
  g.close(s);
  int done = 0;
  std::error_code tuple_ec{1, std::generic_category()};
  boost::system::error_code redirected = asio::error::fault;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(s, asio::use_awaitable);
        ++done;
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await async_wait(s, asio::as_tuple(asio::use_awaitable));
        tuple_ec = ec;
        co_await async_wait(s, asio::redirect_error(asio::use_awaitable, redirected));
        ++done;
      },
      asio::detached);
  std::future<void> fut = async_wait(io.get_executor(), s, asio::use_future);
  async_wait(io.get_executor(), s, asio::detached);
  auto deferred_op = async_wait(io.get_executor(), s, asio::deferred);
  std::move(deferred_op)([&](std::error_code ec) {
    CHECK_FALSE(ec);
    ++done;
  });
  async_wait(s, asio::bind_executor(io, [&](std::error_code ec) {
               CHECK_FALSE(ec);
               ++done;
             }));
  io.run_for(50ms);  // the gate holds the stream: nothing may complete
  CHECK(done == 0);
  CHECK(fut.wait_for(0s) == std::future_status::timeout);
  g.open();
  io.run();
  CHECK(done == 4);
  CHECK_FALSE(tuple_ec);
  CHECK_FALSE(redirected);
  CHECK_NOTHROW(fut.get());
}

TEST_CASE("async_wait on a caller's event", "[async_io][gpu]") {
  asio::io_context io;
  stream s = stream::create(test::ctx());
  event e = event::create(test::ctx());
  launch(s, test::kernels().kernel("sleep_ns"), one, 1'000'000ull);
  e.record(s);
  bool done = false;
  async_wait(io.get_executor(), e, [&](std::error_code ec) {
    CHECK_FALSE(ec);
    CHECK(e.query());
    done = true;
  });
  io.run();
  CHECK(done);
}

// [timing]: 10,000 coroutines x 3 policies, 90,000 launches and copies.
TEST_CASE("10,000 concurrent coroutines over 64 streams all complete with correct results", "[async_io][gpu][timing]") {
  auto policy = GENERATE(poll_policy::balanced(), poll_policy::latency(), poll_policy::efficient());
  constexpr int n = 10'000, streams = 64;
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(policy);
  std::vector<stream> ss;
  for (int i = 0; i < streams; ++i) ss.push_back(stream::create(test::ctx()));
  device_buffer dev = device_buffer::allocate(test::ctx(), n * sizeof(int));
  pinned_buffer host = pinned_buffer::allocate(test::ctx(), n * sizeof(int));
  std::span<int> out = host.as_span<int>();
  std::fill(out.begin(), out.end(), -1);
  kernel_ref fill = test::kernels().kernel("fill_iota");
  kernel_ref add = test::kernels().kernel("add_value");
  int correct = 0, finished = 0;
  for (int i = 0; i < n; ++i)
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          stream_ref s = ss[i % streams];
          int* p = dev.data<int>() + i;
          co_await async_launch(s, fill, one, p, 1, i);  // *p = i
          co_await async_launch(s, add, one, p, 1, 7);   // *p = i + 7
          co_await async_copy(s, std::as_writable_bytes(out.subspan(i, 1)), dev.subspan(i * sizeof(int), sizeof(int)));
          if (out[i] == i + 7) ++correct;
          ++finished;
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  io.run();
  CHECK(finished == n);
  CHECK(correct == n);
  CHECK(asio::use_service<completion_service>(io).stats().pending_tokens == 0);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("cancelling a wait while the kernel runs completes it at once; the GPU work and keep-alive go on",
          "[async_io][gpu][concurrent]") {
  auto type = GENERATE(asio::cancellation_type::total, asio::cancellation_type::partial,
                       asio::cancellation_type::terminal);
  asio::io_context io;
  stream s = stream::create(test::ctx());
  test::gate g;
  g.close(s);
  auto keep = std::make_shared<int>(1);
  std::weak_ptr<int> kept = keep;
  asio::cancellation_signal signal;
  std::error_code result;
  int calls = 0;
  async_wait(io.get_executor(), s, std::move(keep), asio::bind_cancellation_slot(signal.slot(), [&](std::error_code ec) {
               ++calls;
               result = ec;
             }));
  // A coroutine cancelled through its own slot gets a cuda_error.
  asio::cancellation_signal co_signal;
  std::error_code co_error;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // A coroutine lets only terminal cancellation through unless told otherwise.
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        try {
          co_await async_launch(s, test::kernels().kernel("sleep_ns"), one, 1'000ull);
        } catch (const cuda_error& e) {
          co_error = e.code();
        }
      },
      asio::bind_cancellation_slot(co_signal.slot(), asio::detached));
  asio::steady_timer t(io, 20ms);
  t.async_wait([&](boost::system::error_code) {
    signal.emit(type);
    co_signal.emit(type);
  });
  io.run();  // returns although the stream is still gated
  CHECK(calls == 1);
  CHECK(result == std::errc::operation_canceled);
  CHECK(co_error == std::errc::operation_canceled);
  CHECK_FALSE(kept.expired());
  CHECK_FALSE(s.query());  // the GPU work is still held by the gate
  g.open();
  s.synchronize();
  CHECK(eventually([&] { return kept.expired(); }));
  CHECK(calls == 1);
}

// [timing]: asserts at least 50 1 ms timer ticks run on the io thread during a 300 ms kernel.
TEST_CASE("the io thread is never blocked while a long kernel is awaited", "[async_io][gpu][timing]") {
  auto policy = GENERATE(poll_policy::balanced(), poll_policy::latency(), poll_policy::efficient());
  asio::io_context io;
  asio::use_service<completion_service>(io).set_policy(policy);
  stream s = stream::create(test::ctx());
  const auto io_thread = std::this_thread::get_id();
  int ticks = 0;
  bool other_thread = false, done = false;
  asio::steady_timer timer(io);
  std::function<void()> tick = [&] {
    timer.expires_after(1ms);
    timer.async_wait([&](boost::system::error_code ec) {
      if (ec || done) return;
      ++ticks;
      other_thread |= std::this_thread::get_id() != io_thread;
      tick();
    });
  };
  tick();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_launch(s, test::kernels().kernel("sleep_ns"), one, 300'000'000ull);  // 300 ms
        done = true;
        timer.cancel();
      },
      asio::detached);
  io.run();
  CHECK(done);
  CHECK_FALSE(other_thread);
  // ~300 timer periods fit in the kernel; a blocked io thread would manage none. Generous bound.
  CHECK(ticks >= 50);
}

TEST_CASE("pooled events are reused, not created per wait", "[async_io][gpu]") {
  asio::io_context io;
  stream s = stream::create(test::ctx());
  auto& src = cuda_completion_source::instance();
  for (int i = 0; i < 100; ++i) async_wait(io.get_executor(), s, asio::detached);
  io.run();
  const std::size_t created = src.created_events(test::ctx());
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 100; ++i) async_wait(io.get_executor(), s, asio::detached);
    io.restart();
    io.run();
  }
  // At most 100 waits are in flight at once: the pool may grow to what a round holds beyond the warm-up's peak (a
  // slow run, under compute-sanitizer, peaked at 68 then 100), never by one event per wait (1,000 here).
  CHECK(src.created_events(test::ctx()) - created <= 100);
  CHECK(eventually([&] { return src.idle_events(test::ctx()) == src.created_events(test::ctx()); }));
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("a new stream that reuses a destroyed stream's handle never completes the old stream's waits",
          "[async_io][gpu][concurrent]") {
  // Waits are queued per stream and one query of the newest completes a run: keyed by handle, a new stream with the
  // old handle would share the old (still gated) stream's FIFO, and its newest event would complete the old wait.
  // Keys are stream ids. Whether b's work runs before the gate opens is the hardware's choice (a new stream may get
  // the destroyed one's hardware queue, seen on the H200), so the FIFOs are counted instead.
  asio::io_context io;
  test::gate g;
  bool old_done = false, new_done = false;
  CUstream old_handle = nullptr;
  {
    stream a = stream::create(test::ctx());
    old_handle = a.get();
    g.close(a);
    async_wait(io.get_executor(), a, [&](std::error_code ec) {
      CHECK_FALSE(ec);
      old_done = true;
    });
  }  // destroyed while its work (the gate) is pending: the driver lets that work finish
  stream b = stream::create(test::ctx());
  if (b.get() != old_handle) WARN("the driver did not reuse the stream handle: this run cannot tell keys apart");
  launch(b, test::kernels().kernel("empty_kernel"), {.grid = 1, .block = 1});
  async_wait(io.get_executor(), b, [&](std::error_code ec) {
    CHECK_FALSE(ec);
    new_done = true;
  });
  CHECK(asio::use_service<completion_service>(io).stats().active_queues == 2);  // one FIFO per stream
  io.run_for(200ms);
  CHECK_FALSE(old_done);  // the gate still holds the old stream
  g.open();
  io.run();
  CHECK(old_done);
  CHECK(new_done);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("a wait alone on its stream gets a host word while lone waits stay alone; joined ones do not; all complete",
          "[async_io][gpu][concurrent]") {
  cuda_completion_source& src = cuda_completion_source::instance();
  src.use_host_words(true);
  event_pool::for_context(test::ctx())->prepare(4);  // words ready (a pool grows them in the background)
  asio::io_context io;
  stream s = stream::create(test::ctx());
  test::gate g;
  g.close(s);
  int done = 0;
  auto count = [&](std::error_code ec) {
    CHECK_FALSE(ec);
    ++done;
  };
  const std::uint64_t words = src.host_word_waits();
  async_wait(io.get_executor(), s, count);
  CHECK(src.host_word_waits() == words + 1);
  async_wait(io.get_executor(), s, count);  // the first one's query of the newest answers for it: no word
  async_wait(io.get_executor(), s, count);
  CHECK(src.host_word_waits() == words + 1);
  io.run_for(50ms);
  CHECK(done == 0);  // a pending word falls back to the event, which is pending too
  g.open();
  io.restart();
  io.run();
  CHECK(done == 3);
  // The lone wait was joined before it completed: the word did not pay, so the next lone wait gets none...
  async_wait(io.get_executor(), s, count);
  CHECK(src.host_word_waits() == words + 1);
  io.restart();
  io.run();
  CHECK(done == 4);
  // ...and as that one stayed alone until done, the next gets a word again.
  async_wait(io.get_executor(), s, count);
  CHECK(src.host_word_waits() == words + 2);
  io.restart();
  io.run();
  CHECK(done == 5);
}

TEST_CASE("what a stream copied to pinned memory is visible once its host word says done", "[async_io][gpu]") {
  cuda_completion_source& src = cuda_completion_source::instance();
  src.use_host_words(true);
  constexpr int streams = 8, rounds = 200;
  event_pool::for_context(test::ctx())->prepare(streams);  // words ready (a pool grows them in the background)
  asio::io_context io;
  std::vector<stream> ss;
  for (int i = 0; i < streams; ++i) ss.push_back(stream::create(test::ctx()));
  device_buffer dev = device_buffer::allocate(test::ctx(), streams * sizeof(int));
  pinned_buffer host = pinned_buffer::allocate(test::ctx(), streams * sizeof(int));
  std::span<int> out = host.as_span<int>();
  kernel_ref write_to = test::kernels().kernel("write_to");
  const std::uint64_t words = src.host_word_waits();
  int correct = 0;
  for (int c = 0; c < streams; ++c)
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          for (int r = 0; r < rounds; ++r) {
            const int value = c * 100'000 + r;
            launch(ss[c], write_to, one, dev.data<int>() + c, value);
            co_await async_copy(ss[c], std::as_writable_bytes(out.subspan(c, 1)),
                                dev.subspan(c * sizeof(int), sizeof(int)));
            if (out[c] == value) ++correct;  // no host-side synchronisation beyond the word
          }
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  io.run();
  CHECK(correct == streams * rounds);
  CHECK(src.host_word_waits() == words + streams * rounds);  // each copy was its stream's only wait
}

TEST_CASE("with host words off, waits complete by their events alone", "[async_io][gpu]") {
  cuda_completion_source& src = cuda_completion_source::instance();
  src.use_host_words(false);
  asio::io_context io;
  stream s = stream::create(test::ctx());
  const std::uint64_t words = src.host_word_waits();
  int done = 0;
  for (int i = 0; i < 20; ++i)
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await async_launch(s, test::kernels().kernel("empty_kernel"), one);
          ++done;
        },
        asio::detached);
  io.run();
  src.use_host_words(true);
  CHECK(done == 20);
  CHECK(src.host_word_waits() == words);
}

TEST_CASE("async_launch takes any completion token as its last argument; launch_future is its use_future form",
          "[async_io][gpu]") {
  stream s = stream::create(test::ctx());
  kernel_ref add = test::kernels().kernel("add_value");
  pinned_buffer counter = pinned_buffer::allocate(test::ctx(), sizeof(int));
  *counter.data<int>() = 0;
  std::future<void> a = launch_future(s, add, one, counter.data<int>(), 1, 2);
  std::future<void> b = async_launch(s, add, one, counter.data<int>(), 1, 3, asio::use_future);
  std::error_code seen{1, std::generic_category()};
  async_launch(s, add, one, counter.data<int>(), 1, 4, [&](std::error_code ec) { seen = ec; });
  a.get();
  b.get();
  CHECK(eventually([&] { return !seen; }));
  CHECK(*counter.data<volatile int>() == 9);
  // A bad argument still throws from the call, whatever the token.
  CHECK_THROWS_AS(async_launch(s, add, one, counter.data<int>(), 1, asio::use_future), cuda_error);
}
