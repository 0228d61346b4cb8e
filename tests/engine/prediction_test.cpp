// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Predicted ends: the duration table learns from observations, the poll schedule wakes before a predicted end and
// reads closely through it, keeps the fault check on its period, and backs off within [min_sleep, max_sleep] for
// waits nobody predicted. Asserted on what the policy and the table compute, never on wall-clock lateness.
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/duration_predictor.hpp>
#include <cuasync/engine/host_completion_source.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

using namespace cuasync;
using namespace std::chrono_literals;

namespace {
constexpr std::int64_t us = 1000;

poll_policy::predicted_end ends_in(std::chrono::nanoseconds until, std::chrono::nanoseconds duration) {
  return {until, duration};
}
}  // namespace

TEST_CASE("the predictor learns a duration from close reads, the smallest of the last ones", "[engine][predict]") {
  duration_predictor p;
  const std::uint64_t k = duration_predictor::key_of(42, 7);
  CHECK(p.predict(k) == 0);
  CHECK(p.predict(0) == 0);
  p.observe(k, 1000 * us - 2 * us, 1000 * us + 1 * us);  // close: pending 2 µs before, seen 1 µs after
  CHECK(p.predict(k) == 1001 * us);
  p.observe(k, 995 * us, 997 * us);
  p.observe(k, 1003 * us, 1004 * us);
  CHECK(p.predict(k) == 997 * us);  // the smallest close sample: a late read never teaches a late end
  // Other keys and other contexts are other work.
  CHECK(p.predict(duration_predictor::key_of(42, 8)) == 0);
  CHECK(p.predict(duration_predictor::key_of(43, 7)) == 0);
  // Only the last four close samples count: the 997 µs one ages out.
  for (int i = 0; i < duration_predictor::kept; ++i) p.observe(k, 1010 * us, 1012 * us);
  CHECK(p.predict(k) == 1012 * us);
}

TEST_CASE("one-off work does not push repeating work out of the table", "[engine][predict]") {
  duration_predictor p;
  const std::uint64_t repeating = duration_predictor::key_of(77, 1);
  for (int i = 0; i < 4; ++i) p.observe(repeating, 500 * us, 501 * us);
  for (std::uint64_t k = 1000; k < 1000 + 20 * duration_predictor::set_count; ++k) {
    const std::uint64_t once = duration_predictor::key_of(k, 1);
    p.observe(once, 200 * us, 201 * us);
  }
  CHECK(p.predict(repeating) == 501 * us);
  // Durations past 32 bits of ns saturate: predicted early, never late.
  const std::uint64_t long_one = duration_predictor::key_of(78, 1);
  p.observe(long_one, 9'000'000'000LL, 9'000'000'001LL);
  CHECK(p.predict(long_one) == UINT32_MAX);
}

TEST_CASE("a loose read teaches a lower bound until a close read replaces it", "[engine][predict]") {
  duration_predictor p;
  const std::uint64_t k = duration_predictor::key_of(5, 1);
  p.observe(k, 3000 * us, 3100 * us);  // seen pending at 3.0 ms, done at 3.1 ms (a backoff's sleep between)
  CHECK(p.predict(k) == 3000 * us);    // the lower bound: waking there is never late
  p.observe(k, 2950 * us, 3060 * us);  // another loose one: the larger lower bound stands
  CHECK(p.predict(k) == 3000 * us);
  p.observe(k, 3040 * us, 3042 * us);  // read closely
  CHECK(p.predict(k) == 3042 * us);
  // Loose, pending before the estimate and done after it: consistent with it, but not a confirmation (a late
  // wake-up looks the same as an estimate that is too long): lowered a step, never below what was seen pending.
  p.observe(k, 3000 * us, 3200 * us);
  CHECK(p.predict(k) == 3000 * us);
  p.observe(k, 3040 * us, 3042 * us);  // read closely: confirmed again
  CHECK(p.predict(k) == 3042 * us);
}

TEST_CASE("an estimate that is too long is lowered until a wake-up comes before the end", "[engine][predict]") {
  duration_predictor p;
  const std::uint64_t k = duration_predictor::key_of(6, 1);
  // One slow run read closely (a descheduled device thread, a cold first launch): 2.4 ms.
  p.observe(k, 2398 * us, 2400 * us);
  REQUIRE(p.predict(k) == 2400 * us);
  // The work really takes 50 µs. Each wait sleeps to just before the estimate and finds it done, late by more than
  // the margin (a loaded machine's timer): done after the estimate, so nothing shows it wrong, yet it is lowered.
  std::int64_t est = p.predict(k);
  int waits = 0;
  while (est > 100 * us && waits < 100) {
    p.observe(k, 5 * us, est + 60 * us);
    const std::int64_t next = p.predict(k);
    CHECK(next < est);
    CHECK(next >= 5 * us);  // never below what was seen pending
    est = next;
    ++waits;
  }
  CHECK(waits < 40);  // geometric: an eighth a wait
  // The wake-up now comes before the end: a close read gives the duration and the cap goes.
  p.observe(k, 49 * us, 50 * us);
  CHECK(p.predict(k) == 50 * us);
  // Found done at the first look, long before the estimate (pending from its start, 0): the key starts afresh
  // (unknown: the backoff), as a wait that was never seen pending still teaches.
  p.observe(k, 0, 30 * us);
  CHECK(p.predict(k) == 0);
}

TEST_CASE("a changed duration is learnt again", "[engine][predict]") {
  duration_predictor p;
  const std::uint64_t k = duration_predictor::key_of(9, 1);
  for (int i = 0; i < 4; ++i) p.observe(k, 1000 * us, 1002 * us);
  REQUIRE(p.predict(k) == 1002 * us);
  // Shorter: the next wake-up (planned just before 1 ms) finds it done long before; the read was loose.
  p.observe(k, 100 * us, 900 * us);
  CHECK(p.predict(k) == 100 * us);
  p.observe(k, 498 * us, 500 * us);
  CHECK(p.predict(k) == 500 * us);
  // Longer: still pending well past the estimate (the close read gave up; the backoff saw it at 2 ms).
  p.observe(k, 1990 * us, 2100 * us);
  CHECK(p.predict(k) == 1990 * us);
  p.observe(k, 1998 * us, 2000 * us);
  CHECK(p.predict(k) == 2000 * us);
}

TEST_CASE("the schedule sleeps until just before a predicted end, then polls back to back", "[engine][predict]") {
  poll_policy b = poll_policy::balanced();
  CHECK(b.predict);  // on by default
  const auto m = b.margin(1ms);
  CHECK(m == b.wake_margin + std::chrono::nanoseconds(1ms) / 64);
  CHECK(b.margin(10s) == b.wake_margin + 1ms);  // the duration's share is capped
  // Only predicted waits pending, 1 ms before the end: the close reader sleeps until the margin, no spin window.
  auto e = ends_in(1ms, 1ms);
  // The first check comes 2·wake_margin in (an estimate too long costs no more), later ones at a quarter of the
  // wait's age, until the margin before the predicted end.
  CHECK(b.next_delay(0ns, &e, false, true) == 2 * b.wake_margin);
  e = ends_in(600us, 1ms);
  CHECK(b.next_delay(0ns, &e, false, true) == 2 * b.wake_margin);
  e = ends_in(400us, 1ms);
  CHECK(b.next_delay(0ns, &e, false, true) == 150us);
  e = ends_in(200us, 1ms);
  CHECK(b.next_delay(0ns, &e, false, true) == 200us - m);
  b.check_divisor = 0;  // no checks: straight to the margin
  e = ends_in(1ms, 1ms);
  CHECK(b.next_delay(0ns, &e, false, true) == 1ms - m);
  b.check_divisor = poll_policy::balanced().check_divisor;
  // Within the margin before the end, and up to the margin after it: back to back.
  e = ends_in(m - 1ns, 1ms);
  CHECK(b.next_delay(5ms, &e, false, true) == 0ns);
  e = ends_in(-m + 1ns, 1ms);
  CHECK(b.next_delay(5ms, &e, false, true) == 0ns);
  // Past the window the prediction missed: the backoff (time since activity / 30).
  e = ends_in(-m - 1ns, 1ms);
  CHECK(b.next_delay(3ms, &e, false, true) == 100us);
  // A poller that is not the close reader only covers the window's end (and the fault check).
  e = ends_in(1ms, 1ms);
  CHECK(b.next_delay(0ns, &e, false, false) == 2 * b.wake_margin);  // the check
  e = ends_in(100us, 1ms);
  CHECK(b.next_delay(0ns, &e, false, false) == 100us + m);
  e = ends_in(10us, 1ms);
  CHECK(b.next_delay(0ns, &e, false, false) == 10us + m);
  // An unpredicted wait pending beside it keeps its backoff (and its spin window).
  e = ends_in(1ms, 1ms);
  CHECK(b.next_delay(0ns, &e, true, true) == 0ns);
  CHECK(b.next_delay(3ms, &e, true, true) == 100us);
  CHECK(b.next_delay(60ms, &e, true, true) == 1ms - m);
  // Prediction off: the backoff alone.
  poll_policy off = b;
  off.predict = false;
  CHECK(off.next_delay(3ms, &e, false, true) == 100us);
}

TEST_CASE("the fault check keeps a pass on its period while a long predicted wait is pending", "[engine][predict]") {
  for (poll_policy p : {poll_policy::balanced(), poll_policy::latency(), poll_policy::efficient()}) {
    p.predict = true;
    CHECK(p.fault_check <= p.watchdog);
    auto e = ends_in(100ms, 1s);  // 900 ms in: a quarter of its age is more than the fault check
    CHECK(p.next_delay(0ns, &e, false, true) == p.fault_check);
    CHECK(p.next_delay(0ns, &e, false, false) == p.fault_check);
    e = ends_in(960ms, 1s);  // 40 ms in: the check at a quarter of that, if it comes before the fault check
    CHECK(p.next_delay(0ns, &e, false, true) == std::min<std::chrono::nanoseconds>(p.fault_check, 10ms));
  }
}

TEST_CASE("first-seen waits back off within min_sleep and max_sleep", "[engine][predict]") {
  const poll_policy b = poll_policy::balanced();
  CHECK(b.backoff_divisor == 30);
  CHECK(b.next_delay(150us) == b.min_sleep);  // 5 µs clamped up to 10 µs
  CHECK(b.next_delay(3ms) == 100us);
  CHECK(b.next_delay(20ms) == 666666ns);  // ~1.7% late on average, plus the wake-up
  CHECK(b.next_delay(1s) == b.max_sleep);
  CHECK(b.next_delay(60ms) == 2ms);
  CHECK(b.max_sleep <= 2ms);  // a 1 s wait: ~500 passes (1 ms sleeps measured 1.8% of a core, 2.1% with cuasync)
  CHECK(b.executor_backoff == 5ms);
  const poll_policy l = poll_policy::latency();
  CHECK(l.next_delay(1s) == l.max_sleep);
  CHECK(l.next_delay(2100us) == 105us);  // divisor 20
}

namespace {
poll_policy predicting(poll_policy p) {
  p.predict = true;  // the default; CUASYNC_POLL_PREDICT=0 in the environment would turn it off
  return p;
}
struct keyed_waits {
  host_completion_source source;
  completion_queues queues{predicting(poll_policy::balanced())};  // head passes only: the watchdog's period does not matter
  std::vector<std::unique_ptr<queued_wait>> all;
  queued_wait* add(std::uintptr_t queue, std::uintptr_t token, std::uint64_t key, long long issue_ns) {
    all.push_back(std::make_unique<queued_wait>());
    wait_target t{&source, queue, 3, token, nullptr, 0};
    t.work_key = key;
    t.issue_ns = issue_ns;
    REQUIRE(queues.add(std::move(t), all.back().get()));
    return all.back().get();
  }
  std::size_t pass() {
    std::vector<completed_wait> done;
    queues.pass(false, done);
    return done.size();
  }
};
}  // namespace

TEST_CASE("the queues learn a key's duration from its waits and predict the next one's end", "[engine][predict]") {
  keyed_waits w;
  constexpr std::uint64_t key = 0x1234;
  CHECK(w.queues.predicted_ns(key, 3) == 0);
  // Issued 1 ms ago: seen pending by one pass, done by the next. (Each on a stream of its own: on one stream the
  // next one's start would be when this one was seen done.)
  for (int i = 0; i < 3; ++i) {
    const auto t = w.source.create();
    w.add(10 + i, t, key, completion_queues::now_ns() - 1'000'000);
    CHECK(w.pass() == 0);
    w.source.complete(t);
    CHECK(w.pass() == 1);
  }
  const std::int64_t learnt = w.queues.predicted_ns(key, 3);
  CHECK(learnt >= 1'000'000);
  CHECK(learnt < 1'000'000'000);  // the passes' own delay, however loaded the machine
  CHECK(w.queues.predicted_ns(key, 4) == 0);  // another context's work
  CHECK(w.queues.stats().predicted == 2);     // the second and third waits were predicted when added

  // The next one, issued now, ends in about `learnt`: the schedule waits until the margin before it.
  const auto t = w.source.create();
  w.add(1, t, key, completion_queues::now_ns());
  CHECK_FALSE(w.queues.has_unpredicted());
  const auto until = w.queues.until_close_read();
  REQUIRE(until);
  CHECK(*until <= std::chrono::nanoseconds(learnt));
  CHECK(w.queues.next_delay(true) <= *until + 1ms);
  CHECK(w.queues.next_delay(true) <= w.queues.policy().fault_check);
  // A wait without a key beside it is unpredicted: it gets the backoff.
  const auto plain = w.source.create();
  w.add(2, plain, 0, 0);
  CHECK(w.queues.has_unpredicted());
  // A fault reaches the predicted wait at the next pass, whenever its end was predicted.
  w.source.complete(t, std::error_code(700, std::generic_category()), failure_scope::group);
  CHECK(w.pass() == 2);  // the faulted wait and, in the same group, the plain one
  CHECK(w.queues.empty());
  // A failure teaches nothing.
  CHECK(w.queues.predicted_ns(key, 3) == learnt);
}

TEST_CASE("a predicted wait that outruns its window is read at a fraction of its overrun", "[engine][predict]") {
  const poll_policy b = poll_policy::balanced();
  // Just past the window: at least half the wake margin (no spin on a wait that may run much longer).
  CHECK(b.overrun_delay(0ns) == b.wake_margin / 2);
  // Far past it: an eighth of the overrun, however long ago the last activity was (the backoff alone slept up to
  // max_sleep, 2 ms, on a 20 ms wait a few hundred us past its prediction).
  CHECK(b.overrun_delay(8ms) == 1ms);
  CHECK(b.overrun_delay(400us) == 50us);
  CHECK(b.overrun_delay(8ms) < b.next_delay(60ms));
}
