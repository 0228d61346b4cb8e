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

namespace {
poll_policy manual_policy() {
  // In-executor mode: passes run only when the test runs the io_context or calls poll_once.
  poll_policy p = poll_policy::balanced();
  p.mode = poll_mode::in_executor;
  p.watchdog = std::chrono::hours(1);
  return p;
}
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

namespace {
// Waits on queue 7 with the given orders; results by index.
struct ordered_waits {
  host_setup& h;
  std::vector<std::uintptr_t> tokens;
  std::vector<std::error_code> results;
  std::vector<int> calls;
  std::vector<int> completion_order;
  void add(std::uint64_t order) {
    const std::size_t i = tokens.size();
    tokens.push_back(h.source.create());
    results.emplace_back();
    calls.push_back(0);
    wait_target t = h.target(7, tokens.back());
    t.order = order;
    async_wait(h.io.get_executor(), t, [this, i](std::error_code ec) {
      results[i] = ec;
      ++calls[i];
      completion_order.push_back(static_cast<int>(i));
    });
  }
};
}  // namespace

TEST_CASE("an ordered FIFO whose newest entry is done completes with one query", "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  constexpr int n = 10;
  ordered_waits w{h};
  for (int i = 0; i < n; ++i) w.add(100 + i);
  for (auto t : w.tokens) h.source.complete(t);
  const std::size_t before = h.source.total_queries();
  CHECK(h.service.poll_once() == n);
  CHECK(h.source.total_queries() - before == 1);
  CHECK(h.source.queries(w.tokens.back()) == 1);
  for (int i = 0; i + 1 < n; ++i) CHECK(h.source.queries(w.tokens[i]) == 0);
  CHECK(h.source.live_tokens() == 0);
  CHECK(h.service.stats().completed == n);
  h.io.run();
  for (int i = 0; i < n; ++i) {
    CHECK(w.calls[i] == 1);
    CHECK_FALSE(w.results[i]);
  }
  CHECK(w.completion_order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("an ordered FIFO whose newest entry is pending: one finished token is queried, and completes those before it",
          "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  ordered_waits w{h};
  for (int i = 0; i < 5; ++i) w.add(i + 1);
  h.source.complete(w.tokens[0]);
  h.source.complete(w.tokens[1]);
  const std::size_t before = h.source.total_queries();
  CHECK(h.service.poll_once() == 2);
  // newest (pending), the head 0 (checked first in a new FIFO: done), then back from the newest: 3 (pending), 1
  // (done: completes 1). Token 2 is left for the next pass: a query of finished work costs ~10x a pending one.
  CHECK(h.source.total_queries() - before == 4);
  CHECK(h.source.queries(w.tokens[0]) == 1);
  CHECK(h.source.queries(w.tokens[1]) == 1);
  CHECK(h.source.queries(w.tokens[2]) == 0);
  CHECK(h.source.queries(w.tokens[4]) == 1);
  CHECK(h.service.stats().pending_operations == 3);
  for (int i = 2; i < 5; ++i) h.source.complete(w.tokens[i]);
  CHECK(h.service.poll_once() == 3);
  CHECK(h.source.queries(w.tokens[3]) == 1);  // completed by the newest's answer, not queried again
  CHECK(h.source.queries(w.tokens[4]) == 2);
  h.io.run();
  CHECK(w.completion_order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(h.source.live_tokens() == 0);
}

TEST_CASE("an ordered FIFO whose oldest entry is pending costs two queries, however long it is", "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  ordered_waits w{h};
  for (int i = 0; i < 500; ++i) w.add(i + 1);
  for (int pass = 0; pass < 3; ++pass) {
    const std::size_t before = h.source.total_queries();
    CHECK(h.service.poll_once() == 0);
    CHECK(h.source.total_queries() - before == 2);  // the newest, then the head: nothing done
  }
  for (auto t : w.tokens) h.source.complete(t);
  CHECK(h.service.poll_once() == 500);
  h.io.run();
}

TEST_CASE("a long ordered run whose newest entries are pending completes with O(log n) queries", "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  ordered_waits w{h};
  constexpr int n = 256;
  for (int i = 0; i < n; ++i) w.add(i + 1);
  for (int done_count : {250, 251, 253, 256}) {  // a few more done at each pass
    for (int i = 0; i < done_count; ++i) h.source.complete(w.tokens[i]);
    const std::size_t before = h.source.total_queries();
    const std::size_t completed_before = h.service.stats().completed;
    h.service.poll_once();
    // Galloping back from the newest, the pass stops at its first finished probe: it completes the done prefix but
    // for at most as many entries as are still pending (they wait for the next pass).
    const std::size_t completed = h.service.stats().completed;
    CHECK(completed <= static_cast<std::size_t>(done_count));
    CHECK(completed + (n - done_count) >= static_cast<std::size_t>(done_count));
    CHECK(h.source.total_queries() - before <= 8 + 3);  // head-first polling would query ~250 tokens
    CHECK(completed - completed_before > 0);
  }
  CHECK(h.service.stats().completed == static_cast<std::size_t>(n));  // the newest was done in the last pass
  for (int i = 0; i < n; ++i) CHECK(h.source.queries(w.tokens[i]) <= 4);
  // A done token is queried at most once (the first 250 were done from the start); a few are queried at all.
  std::size_t done_queries = 0;
  for (int i = 0; i < 250; ++i) {
    CHECK(h.source.queries(w.tokens[i]) <= 1);
    done_queries += h.source.queries(w.tokens[i]);
  }
  CHECK(done_queries <= 8);
  h.io.run();
  for (int i = 0; i < n; ++i) CHECK(w.calls[i] == 1);
  for (int i = 0; i < n; ++i) CHECK(w.completion_order[i] == i);
  CHECK(h.source.live_tokens() == 0);
}

TEST_CASE("completions found off the io thread are handed over in one post per executor, in order, none lost",
          "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  constexpr int n = 50;
  std::vector<int> order;
  std::vector<std::uintptr_t> tokens;
  for (int i = 0; i < n; ++i) {
    tokens.push_back(h.source.create());
    async_wait(h.io.get_executor(), h.target(100 + i, tokens.back()), [&order, i](std::error_code ec) {
      CHECK_FALSE(ec);
      order.push_back(i);
      if (i == 20) throw std::runtime_error("handler 20 throws");
    });
  }
  for (auto t : tokens) h.source.complete(t);
  CHECK(h.service.poll_once() == n);  // from this thread: handed to the io executor
  CHECK(h.service.stats().batches == 1);
  CHECK(order.empty());  // never inline
  // The batch runs them in order until one throws; the rest are posted again, not lost, and none runs twice.
  CHECK_THROWS_AS(h.io.poll(), std::runtime_error);
  CHECK(order.size() == 21);
  h.io.restart();
  h.io.poll();
  CHECK(order.size() == n);
  for (int i = 0; i < n && i < int(order.size()); ++i) CHECK(order[i] == i);
  CHECK(h.service.stats().completed == n);
}

TEST_CASE("a failed newest entry fails its whole run with its error", "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  const std::error_code fault{700, std::generic_category()};
  ordered_waits w{h};
  for (int i = 0; i < 3; ++i) w.add(i + 1);
  auto other = h.source.create();
  bool other_called = false;
  async_wait(h.io.get_executor(), h.target(8, other), [&](std::error_code) { other_called = true; });
  h.source.complete(w.tokens[2], fault, failure_scope::operation);
  CHECK(h.service.poll_once() == 3);
  h.io.run_for(20ms);
  for (int i = 0; i < 3; ++i) CHECK(w.results[i] == fault);
  CHECK(h.service.stats().failed == 3);
  CHECK_FALSE(other_called);  // another queue is not touched
  h.source.complete(other);
  h.io.run_for(200ms);
  CHECK(other_called);
}

TEST_CASE("ordered FIFOs stay in recording order when a wait starts late; unordered entries are polled one by one",
          "[async_io]") {
  host_setup h;
  h.service.set_policy(manual_policy());
  ordered_waits w{h};
  SECTION("a wait recorded earlier but started later goes before the later records") {
    w.add(5);
    w.add(3);  // e.g. a lazily started awaitable whose event was recorded first
    h.source.complete(w.tokens[1]);
    CHECK(h.service.poll_once() == 1);  // the head is order 3, done; order 5 (newest) is pending
    CHECK(w.calls[0] == 0);
    h.io.poll();
    CHECK(w.calls[1] == 1);
    h.source.complete(w.tokens[0]);
    CHECK(h.service.poll_once() == 1);
    h.io.run();
    CHECK(w.calls[0] == 1);
  }
  SECTION("an entry without an order turns the newest-first query off until the FIFO drains") {
    w.add(1);
    w.add(0);  // no promise about this one
    w.add(2);
    h.source.complete(w.tokens[2]);
    const std::size_t before = h.source.total_queries();
    CHECK(h.service.poll_once() == 0);  // head pending; the done newest must not complete the others
    CHECK(h.source.total_queries() - before == 1);
    CHECK(h.source.queries(w.tokens[2]) == 0);
    for (auto t : w.tokens) h.source.complete(t);
    CHECK(h.service.poll_once() == 3);
    h.io.run();
    // Drained: ordered again, so a run completes with one query.
    w.add(3);
    w.add(4);
    h.source.complete(w.tokens[3]);
    h.source.complete(w.tokens[4]);
    const std::size_t before2 = h.source.total_queries();
    CHECK(h.service.poll_once() == 2);
    CHECK(h.source.total_queries() - before2 == 1);
    h.io.restart();
    h.io.run();
    for (int c : w.calls) CHECK(c == 1);
  }
}

namespace {
// A host source that remembers which thread made each query.
class thread_recording_source final : public completion_source {
 public:
  host_completion_source inner;
  poll_result query(std::uintptr_t token) noexcept override {
    {
      std::lock_guard lock(mutex);
      ++by_thread[std::this_thread::get_id()];
    }
    return inner.query(token);
  }
  void release(std::uintptr_t token) noexcept override { inner.release(token); }
  std::size_t queries_from(std::thread::id id) {
    std::lock_guard lock(mutex);
    return by_thread[id];
  }
  std::size_t queries_not_from(std::thread::id id) {
    std::lock_guard lock(mutex);
    std::size_t n = 0;
    for (auto& [t, c] : by_thread)
      if (t != id) n += c;
    return n;
  }
  std::mutex mutex;
  std::map<std::thread::id, std::size_t> by_thread;
};
}  // namespace

TEST_CASE("balanced: the io executor polls during its window, then hands the wait to the poller thread",
          "[async_io]") {
  thread_recording_source src;
  asio::io_context io;
  completion_service& svc = asio::use_service<completion_service>(io);
  poll_policy p = poll_policy::balanced();
  p.executor_window = 30ms;  // long enough to observe on a loaded machine
  svc.set_policy(p);
  const auto t = src.inner.create();
  std::thread::id io_thread, handler_thread;
  std::error_code result{1, std::generic_category()};
  const auto t0 = std::chrono::steady_clock::now();
  async_wait(io.get_executor(), wait_target{&src, 1, 0, t, nullptr}, [&](std::error_code ec) {
    result = ec;
    handler_thread = std::this_thread::get_id();
  });
  std::promise<std::thread::id> started;
  std::thread runner([&] {
    started.set_value(std::this_thread::get_id());
    io.run();
  });
  io_thread = started.get_future().get();
  REQUIRE(eventually([&] { return svc.stats().handoffs == 1; }));
  const auto handed_over_after = std::chrono::steady_clock::now() - t0;
  CHECK(handed_over_after >= 30ms);
  CHECK(src.queries_from(io_thread) > 0);  // the window's passes ran on the io thread
  CHECK(svc.stats().executor_passes > 0);
  // From now on the poller thread queries, the io thread no longer.
  REQUIRE(eventually([&] { return src.queries_not_from(io_thread) >= 3; }));
  const std::size_t io_queries = src.queries_from(io_thread);
  std::this_thread::sleep_for(30ms);
  CHECK(src.queries_from(io_thread) == io_queries);
  CHECK(src.queries_not_from(io_thread) >= 3);
  src.inner.complete(t);
  runner.join();
  CHECK_FALSE(result);
  CHECK(handler_thread == io_thread);
  CHECK(svc.stats().handoffs == 1);
}

TEST_CASE("balanced: a wait started after the hand-over is polled by the io executor again", "[async_io]") {
  host_setup h;
  poll_policy p = poll_policy::balanced();
  p.executor_window = 5ms;
  h.service.set_policy(p);
  const auto first = h.source.create(), second = h.source.create();
  auto guard = asio::make_work_guard(h.io);
  std::thread runner([&] { h.io.run(); });
  async_wait(h.io.get_executor(), h.target(1, first), [](std::error_code) {});
  REQUIRE(eventually([&] { return h.service.stats().handoffs == 1; }));
  const auto executor_passes = h.service.stats().executor_passes;
  std::atomic<bool> done{false};
  asio::post(h.io, [&] {
    async_wait(h.io.get_executor(), h.target(2, second), [&](std::error_code ec) { done = !ec; });
  });
  CHECK(eventually([&] { return h.service.stats().executor_passes > executor_passes + 10; }));
  h.source.complete(second);
  CHECK(eventually([&] { return done.load(); }));
  h.source.complete(first);
  CHECK(eventually([&] { return h.service.stats().pending_operations == 0; }));
  guard.reset();
  runner.join();
  CHECK(h.service.stats().handoffs >= 1);
}
