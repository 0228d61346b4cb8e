// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The scheduling core on a host completion source (no CUDA): FIFOs, head-only passes, adaptive waiting, hand-over to
// executors, errors, cancellation, exactly-once completion, shutdown.
#include <cuasync/async_io/completion_service.hpp>

#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>

#include <atomic>
#include <future>
#include <mutex>
#include <map>
#include <random>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::eventually;
using cuasync::test::host_setup;
using cuasync::test::manual_policy;

namespace {
const std::error_code aborted{ECANCELED, std::system_category()};
}  // namespace

TEST_CASE("waits of one queue complete in FIFO order and a pass queries only each queue's head", "[async_io]") {
  host_setup h;
  const auto t1 = h.source.create(), t2 = h.source.create(), t3 = h.source.create(), other = h.source.create();
  std::vector<int> order;
  for (auto [t, n] : {std::pair{t1, 1}, {t2, 2}, {t3, 3}})
    async_wait(h.io.get_executor(), h.target(7, t), [&, n = n](std::error_code ec) {
      CHECK_FALSE(ec);
      order.push_back(n);
    });
  async_wait(h.io.get_executor(), h.target(8, other), [&](std::error_code) { order.push_back(4); });
  // The later entries are done, the head is not: nothing completes and the later ones are never queried.
  h.source.complete(t3);
  h.source.complete(t2);
  REQUIRE(eventually([&] { return h.source.queries(t1) >= 20 && h.source.queries(other) >= 20; }));
  CHECK(h.source.queries(t2) == 0);
  CHECK(h.source.queries(t3) == 0);
  CHECK(h.service.stats().pending_operations == 4);
  h.source.complete(t1);
  h.source.complete(other);
  h.io.run();
  CHECK(order.size() == 4);
  std::vector<int> fifo;
  for (int n : order)
    if (n != 4) fifo.push_back(n);
  CHECK(fifo == std::vector<int>{1, 2, 3});
  // Each token is queried once after it is done, then released.
  CHECK(h.source.queries(t2) == 1);
  CHECK(h.source.queries(t3) == 1);
  CHECK(h.source.live_tokens() == 0);
}

TEST_CASE("a pass costs one query per active queue, however many waits are pending", "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  constexpr int queues = 16, per_queue = 500;
  std::vector<std::uintptr_t> tokens;
  int done = 0;
  for (int q = 0; q < queues; ++q)
    for (int i = 0; i < per_queue; ++i) {
      tokens.push_back(h.source.create());
      async_wait(h.io.get_executor(), h.target(100 + q, tokens.back()), [&](std::error_code ec) {
        CHECK_FALSE(ec);
        ++done;
      });
    }
  for (int pass = 0; pass < 5; ++pass) {
    const auto before = h.service.stats();
    CHECK(h.service.poll_once() == 0);
    const auto after = h.service.stats();
    CHECK(after.queries - before.queries == queues);
    CHECK(after.passes - before.passes == 1);
  }
  CHECK(h.service.stats().active_queues == queues);
  for (auto t : tokens) h.source.complete(t);
  h.io.run();
  CHECK(done == queues * per_queue);
  CHECK(h.service.stats().active_queues == 0);
  CHECK(h.source.live_tokens() == 0);
}

TEST_CASE("handlers run on their executor: never inside the initiating call, never on the poller thread",
          "[async_io]") {
  host_setup h;
  const auto done_before = h.source.create();
  h.source.complete(done_before);  // already complete when the wait starts
  const auto later = h.source.create();
  std::atomic<int> calls{0};
  std::thread::id io_thread, handler_thread_1, handler_thread_2;
  bool initiating = true;
  async_wait(h.io.get_executor(), h.target(1, done_before), [&](std::error_code ec) {
    CHECK_FALSE(initiating);
    CHECK_FALSE(ec);
    handler_thread_1 = std::this_thread::get_id();
    ++calls;
  });
  async_wait(h.io.get_executor(), h.target(2, later), [&](std::error_code ec) {
    CHECK_FALSE(ec);
    handler_thread_2 = std::this_thread::get_id();
    ++calls;
  });
  initiating = false;
  CHECK(calls == 0);
  std::thread completer([&] {
    std::this_thread::sleep_for(20ms);
    h.source.complete(later);
  });
  std::thread runner([&] {
    io_thread = std::this_thread::get_id();
    h.io.run();
  });
  runner.join();
  completer.join();
  CHECK(calls == 2);
  CHECK(handler_thread_1 == io_thread);
  CHECK(handler_thread_2 == io_thread);
}

TEST_CASE("io_context::run does not return while a wait is pending", "[async_io]") {
  host_setup h;
  const auto t = h.source.create();
  bool called = false;
  async_wait(h.io.get_executor(), h.target(1, t), [&](std::error_code) { called = true; });
  std::atomic<bool> returned{false};
  std::thread runner([&] {
    h.io.run();
    returned = true;
  });
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(returned);
  h.source.complete(t);
  runner.join();
  CHECK(called);
}

TEST_CASE("a failed token fails its wait; a group failure fails every pending wait of the group", "[async_io]") {
  host_setup h;
  const std::error_code fault{700, std::generic_category()};
  const auto a = h.source.create(), b1 = h.source.create(), b2 = h.source.create(), c = h.source.create(),
             d = h.source.create();
  std::map<std::string, std::error_code> results;
  auto record = [&](std::string name) { return [&, name](std::error_code ec) { results[name] = ec; }; };
  async_wait(h.io.get_executor(), h.target(1, a, /*group*/ 10), record("a"));
  async_wait(h.io.get_executor(), h.target(2, b1, 10), record("b1"));
  async_wait(h.io.get_executor(), h.target(2, b2, 10), record("b2"));
  async_wait(h.io.get_executor(), h.target(3, c, 10), record("c"));
  async_wait(h.io.get_executor(), h.target(4, d, /*another group*/ 20), record("d"));

  SECTION("operation scope") {
    h.source.complete(c, fault, failure_scope::operation);
    REQUIRE(eventually([&] { return h.service.stats().failed == 1; }));
    h.io.run_for(50ms);
    CHECK(results.size() == 1);
    CHECK(results["c"] == fault);
    for (auto t : {a, b1, b2, d}) h.source.complete(t);
    h.io.run();
    CHECK(results.size() == 5);
    CHECK_FALSE(results["a"]);
    CHECK_FALSE(results["d"]);
  }
  SECTION("group scope: a sticky error fails the whole group, even waits behind a pending head") {
    h.source.complete(a, fault, failure_scope::group);
    REQUIRE(eventually([&] { return h.service.stats().failed == 4; }));
    h.io.run_for(50ms);
    CHECK(results.size() == 4);
    for (auto name : {"a", "b1", "b2", "c"}) CHECK(results[name] == fault);
    CHECK(results.count("d") == 0);
    h.source.complete(d);
    h.io.run();
    CHECK_FALSE(results["d"]);
    CHECK(h.source.live_tokens() == 0);
  }
}

TEST_CASE("work of a group that reads as done in the same pass as the group's fault fails with the fault",
          "[async_io]") {
  // On the H200 a context fault made an event on another stream answer CUDA_SUCCESS: that work was aborted, not done.
  host_setup h;
  h.service.set_policy(manual_policy());
  const std::error_code fault{700, std::generic_category()};
  const auto aborted_work = h.source.create(), faulting = h.source.create(), other_group = h.source.create();
  std::map<std::string, std::error_code> results;
  auto record = [&](std::string name) { return [&, name](std::error_code ec) { results[name] = ec; }; };
  async_wait(h.io.get_executor(), h.target(1, aborted_work, /*group*/ 10), record("aborted"));
  async_wait(h.io.get_executor(), h.target(2, faulting, 10), record("faulting"));
  async_wait(h.io.get_executor(), h.target(3, other_group, 20), record("other"));
  h.source.complete(aborted_work);  // reads as done...
  h.source.complete(faulting, fault, failure_scope::group);  // ...in the pass that sees the fault
  h.source.complete(other_group);
  CHECK(h.service.poll_once() == 3);
  h.io.run();
  CHECK(results["faulting"] == fault);
  CHECK(results["aborted"] == fault);
  CHECK_FALSE(results["other"]);  // another context is not affected
  CHECK(h.service.stats().failed == 2);
}

TEST_CASE("cancellation completes once with operation_aborted and keeps the token and keep-alive until done",
          "[async_io]") {
  auto type = GENERATE(asio::cancellation_type::total, asio::cancellation_type::partial,
                       asio::cancellation_type::terminal);
  host_setup h;
  const auto t = h.source.create();
  auto keep = std::make_shared<int>(42);
  std::weak_ptr<int> watch = keep;
  asio::cancellation_signal signal;
  int calls = 0;
  std::error_code result;
  async_wait(h.io.get_executor(), h.target(1, t, 0, std::move(keep)),
             asio::bind_cancellation_slot(signal.slot(), [&](std::error_code ec) {
               ++calls;
               result = ec;
             }));
  asio::post(h.io, [&] { signal.emit(type); });
  h.io.run();  // returns: the cancelled wait no longer holds work
  CHECK(calls == 1);
  CHECK(result == aborted);
  CHECK(result == std::errc::operation_canceled);
  CHECK_FALSE(watch.expired());  // the "GPU work" goes on
  CHECK(h.source.live(t));
  CHECK(h.service.stats().pending_tokens == 1);
  h.source.complete(t);
  CHECK(eventually([&] { return watch.expired() && !h.source.live(t); }));
  CHECK(calls == 1);
  CHECK(h.service.stats().aborted == 1);
}

TEST_CASE("cancellation racing completion completes each wait exactly once", "[async_io]") {
  host_setup h;
  constexpr int n = 2000;
  std::vector<std::uintptr_t> tokens(n);
  std::vector<asio::cancellation_signal> signals(n);
  std::vector<int> calls(n, 0);
  int completed = 0, cancelled = 0;
  for (int i = 0; i < n; ++i) {
    tokens[i] = h.source.create();
    async_wait(h.io.get_executor(), h.target(i % 8, tokens[i]),
               asio::bind_cancellation_slot(signals[i].slot(), [&, i](std::error_code ec) {
                 ++calls[i];
                 (ec ? cancelled : completed) += 1;
               }));
  }
  std::thread completer([&] {
    std::mt19937 rng(7);
    std::vector<int> idx(n);
    for (int i = 0; i < n; ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    for (int i : idx) h.source.complete(tokens[i]);
  });
  // Cancellations are emitted on the io thread (Asio's rule for a slot), racing the poller's completions.
  for (int i = 0; i < n; ++i) asio::post(h.io, [&, i] { signals[i].emit(asio::cancellation_type::terminal); });
  h.io.run();
  completer.join();
  for (int i = 0; i < n; ++i) REQUIRE(calls[i] == 1);
  CHECK(completed + cancelled == n);
  CHECK(eventually([&] { return h.source.live_tokens() == 0; }));
}

TEST_CASE("shutdown destroys pending handlers without calling them and releases tokens once done", "[async_io]") {
  host_completion_source source;
  auto sentinel = std::make_shared<int>(1);
  std::weak_ptr<int> handler_state = sentinel;
  auto keep = std::make_shared<int>(2);
  std::weak_ptr<int> kept = keep;
  std::uintptr_t t1 = source.create(), t2 = source.create();
  bool called = false;
  auto policy = GENERATE(poll_policy::balanced(), poll_policy::latency());
  {
    asio::io_context io;
    asio::use_service<completion_service>(io).set_policy(policy);
    async_wait(io.get_executor(), wait_target{&source, 1, 0, t1, std::move(keep)},
               [&called, s = std::move(sentinel)](std::error_code) { called = true; });
    async_wait(io.get_executor(), wait_target{&source, 1, 0, t2, nullptr}, [&called](std::error_code) { called = true; });
    io.run_for(5ms);
  }
  CHECK_FALSE(called);
  CHECK(handler_state.expired());  // destroyed, not called
  CHECK_FALSE(kept.expired());     // still tied to the token
  CHECK(source.live(t1));
  source.complete(t1);
  source.complete(t2);
  CHECK(eventually([&] { return kept.expired() && source.live_tokens() == 0; }));
  CHECK_FALSE(called);
}

namespace {
struct counting {
  std::atomic<int> live{0}, total{0};
};
template <class T>
struct counting_allocator {
  using value_type = T;
  counting* c;
  explicit counting_allocator(counting* c_) : c(c_) {}
  template <class U>
  counting_allocator(const counting_allocator<U>& o) : c(o.c) {}
  T* allocate(std::size_t n) {
    ++c->live;
    ++c->total;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    --c->live;
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const counting_allocator<U>& o) const { return c == o.c; }
};
}  // namespace

TEST_CASE("wait state is allocated with the handler's allocator and freed before the handler runs", "[async_io]") {
  host_setup h;
  counting c;
  const auto t = h.source.create();
  int live_in_handler = -1;
  async_wait(h.io.get_executor(), h.target(1, t),
             asio::bind_allocator(counting_allocator<int>(&c), [&](std::error_code) { live_in_handler = c.live; }));
  CHECK(c.total >= 1);
  h.source.complete(t);
  h.io.run();
  CHECK(live_in_handler == 0);
  CHECK(c.live == 0);
}

TEST_CASE("in-executor polling needs no poller thread and never blocks the io thread", "[async_io]") {
  host_setup h;
  h.service.set_policy(poll_policy::latency());
  const auto t = h.source.create();
  std::thread::id io_thread = std::this_thread::get_id(), handler_thread;
  int ticks = 0;
  asio::steady_timer timer(h.io);
  std::function<void()> tick = [&] {
    timer.expires_after(1ms);
    timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      if (++ticks == 20) h.source.complete(t);  // "the kernel" finishes while the timer keeps firing
      if (ticks < 20) tick();
    });
  };
  tick();
  bool called = false;
  async_wait(h.io.get_executor(), h.target(1, t), [&](std::error_code ec) {
    CHECK_FALSE(ec);
    called = true;
    handler_thread = std::this_thread::get_id();
  });
  h.io.run();
  CHECK(called);
  CHECK(ticks == 20);
  CHECK(handler_thread == io_thread);
}

TEST_CASE("the watchdog completes a wait whose token finished out of queue order", "[async_io]") {
  host_setup h;
  poll_policy p = poll_policy::balanced();
  p.watchdog = 20ms;
  h.service.set_policy(p);
  const auto head = h.source.create(), behind = h.source.create();
  bool behind_done = false, head_done = false;
  async_wait(h.io.get_executor(), h.target(1, head), [&](std::error_code) { head_done = true; });
  async_wait(h.io.get_executor(), h.target(1, behind), [&](std::error_code) { behind_done = true; });
  h.source.complete(behind);
  while (!behind_done) h.io.run_one();
  CHECK_FALSE(head_done);
  h.source.complete(head);
  h.io.run();
  CHECK(head_done);
}

TEST_CASE("an idle poller uses no CPU", "[async_io]") {
  host_setup h;
  const auto t = h.source.create();
  async_wait(h.io.get_executor(), h.target(1, t), [](std::error_code) {});
  h.source.complete(t);
  h.io.run();  // the poller thread exists and has seen activity
  std::this_thread::sleep_for(50ms);
  auto cpu = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  const double before = cpu();
  std::this_thread::sleep_for(300ms);
  const double used_us = cpu() - before;
  // A spinning or 10 µs-sleeping poller would use 30–300 ms here; blocked, it uses none.
  CHECK(used_us < 15'000);
}
