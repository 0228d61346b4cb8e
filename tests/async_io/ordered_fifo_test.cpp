// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ordered FIFOs on a host completion source (no CUDA): waits that carry their recording order are searched from the
// newest entry, a run completes with the query of its newest finished token, and order survives late starts.
#include <cuasync/async_io/completion_service.hpp>

#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::host_setup;
using cuasync::test::manual_policy;

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
