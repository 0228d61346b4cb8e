// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The engine's core without Asio or CUDA: FIFOs per queue, the ordered search, group failures, detaching, shutdown.
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/host_completion_source.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using namespace cuasync;

namespace {
struct waits {
  host_completion_source source;
  completion_queues queues{[] {
    poll_policy p = poll_policy::balanced();
    p.watchdog = std::chrono::hours(1);
    return p;
  }()};
  std::vector<std::unique_ptr<queued_wait>> all;

  queued_wait* add(std::uintptr_t queue, std::uintptr_t token, std::uint64_t order = 0, std::uintptr_t group = 0,
                   std::shared_ptr<void> keep_alive = nullptr) {
    all.push_back(std::make_unique<queued_wait>());
    REQUIRE(queues.add({&source, queue, group, token, std::move(keep_alive), order}, all.back().get()));
    return all.back().get();
  }
  std::vector<completed_wait> pass(bool full = false) {
    std::vector<completed_wait> done;
    queues.pass(full, done);
    return done;
  }
};
std::vector<queued_wait*> waits_of(const std::vector<completed_wait>& done) {
  std::vector<queued_wait*> v;
  for (const auto& d : done) v.push_back(d.wait);
  return v;
}
}  // namespace

TEST_CASE("poll policies spin after activity, then back off as a wait grows", "[engine]") {
  using namespace std::chrono_literals;
  const poll_policy b = poll_policy::balanced();
  CHECK(b.mode == poll_mode::poller_thread);
  CHECK(b.executor_window == 150us);
  CHECK(b.next_delay(99us) == 0ns);
  CHECK(b.next_delay(100us) == 10us);
  CHECK(b.next_delay(2ms) == 66666ns);  // divisor 30
  CHECK(b.next_delay(1s) == 2ms);
  CHECK(poll_policy::efficient().next_delay(0ns) == 50us);
  CHECK(poll_policy::latency().mode == poll_mode::in_executor);
  bool known = true;
  CHECK(poll_policy::from_name("efficient", &known) == poll_policy::efficient());
  CHECK(known);
  CHECK(poll_policy::from_name("fast", &known) == poll_policy::balanced());
  CHECK_FALSE(known);
}

TEST_CASE("a queue's waits complete in order; a pass queries each queue's head and stops at a pending one",
          "[engine]") {
  waits w;
  const auto t1 = w.source.create(), t2 = w.source.create(), t3 = w.source.create(), other = w.source.create();
  queued_wait* a = w.add(7, t1);
  queued_wait* b = w.add(7, t2);
  queued_wait* c = w.add(7, t3);
  queued_wait* d = w.add(8, other);
  w.source.complete(t3);
  w.source.complete(t2);
  CHECK(w.pass().empty());  // the head is pending: nothing completes, the later entries are not queried
  CHECK(w.source.queries(t2) == 0);
  CHECK(w.source.queries(t3) == 0);
  CHECK(w.queues.stats().pending_operations == 4);
  w.source.complete(t1);
  CHECK(waits_of(w.pass()) == std::vector<queued_wait*>{a, b, c});
  CHECK(a->entry == nullptr);
  w.source.complete(other);
  CHECK(waits_of(w.pass()) == std::vector<queued_wait*>{d});
  CHECK(w.source.live_tokens() == 0);  // each done token released once
  CHECK(w.queues.empty());
  CHECK(w.queues.stats().completed == 4);
}

TEST_CASE("an ordered queue completes its done prefix with one query of finished work", "[engine]") {
  waits w;
  std::vector<std::uintptr_t> tokens;
  std::vector<queued_wait*> ops;
  for (int i = 0; i < 100; ++i) {
    tokens.push_back(w.source.create());
    ops.push_back(w.add(1, tokens.back(), i + 1));
  }
  w.source.complete(tokens[0]);  // the head was pending when first seen: the first pass checks it first
  for (auto t : tokens) w.source.complete(t);
  const std::size_t before = w.source.total_queries();
  CHECK(w.pass().size() == 100);  // the newest is done: one query answers for all
  CHECK(w.source.total_queries() - before == 1);
}

TEST_CASE("a group failure fails every waiting operation of the group, and those done in the same pass", "[engine]") {
  waits w;
  const std::error_code fault{700, std::generic_category()};
  const auto bad = w.source.create(), pending = w.source.create(), done_too = w.source.create(),
             elsewhere = w.source.create();
  w.add(1, done_too, 0, 42);  // another queue of group 42, done before the fault is seen
  w.add(2, bad, 0, 42);
  w.add(3, pending, 0, 42);
  w.add(4, elsewhere, 0, 43);
  w.source.complete(done_too);
  w.source.complete(bad, fault, failure_scope::group);
  const auto done = w.pass();
  CHECK(done.size() == 3);
  for (const auto& d : done) CHECK(d.error == fault);
  CHECK_FALSE(w.queues.empty());  // group 43 is untouched
  w.source.complete(elsewhere);
  const auto rest = w.pass();
  REQUIRE(rest.size() == 1);
  CHECK_FALSE(rest[0].error);
}

TEST_CASE("a detached wait is handed back once; its token and keep-alive stay until done", "[engine]") {
  waits w;
  const auto t = w.source.create();
  auto owner = std::make_shared<int>(5);
  std::weak_ptr<int> watch = owner;
  queued_wait* op = w.add(1, t, 0, 0, std::move(owner));
  CHECK(w.queues.detach(op));
  CHECK_FALSE(w.queues.detach(op));  // once
  CHECK(w.queues.stats().pending_operations == 0);
  CHECK(w.pass().empty());
  CHECK_FALSE(watch.expired());  // the work goes on: what it uses stays alive
  CHECK(w.source.live(t));
  w.source.complete(t);
  CHECK(w.pass().empty());  // nobody to hand it to
  CHECK(watch.expired());
  CHECK_FALSE(w.source.live(t));
}

TEST_CASE("a watchdog pass completes a token that finished out of queue order", "[engine]") {
  waits w;
  const auto first = w.source.create(), second = w.source.create();
  w.add(1, first);
  queued_wait* b = w.add(1, second);
  w.source.complete(second);
  CHECK(w.pass().empty());
  CHECK(waits_of(w.pass(true)) == std::vector<queued_wait*>{b});
  w.source.complete(first);
  CHECK(w.pass().size() == 1);
}

TEST_CASE("after shut_down new waits are refused, attached ones handed back, tokens kept until done", "[engine]") {
  waits w;
  const auto t = w.source.create(), late = w.source.create();
  queued_wait* op = w.add(1, t);
  const auto detached = w.queues.shut_down();
  CHECK(detached == std::vector<queued_wait*>{op});
  queued_wait refused;
  CHECK_FALSE(w.queues.add({&w.source, 1, 0, late, nullptr, 0}, &refused));
  CHECK_FALSE(w.source.live(late));  // released at once
  CHECK_FALSE(w.queues.empty());
  w.source.complete(t);
  CHECK(w.pass().empty());
  CHECK(w.queues.empty());
  CHECK(w.source.live_tokens() == 0);
}
