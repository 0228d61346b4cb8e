// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Lone waits get host words (cuda_completion_source.hpp): a pass sees them done with a memory read. While a word is
// still to come, a pass asks the wait's event only every fault-check period (a faulted context never writes the
// word; the event brings the error), so passes over many streams make no driver call in between. With words alone
// (use_words_alone), such a wait records no event at all: the fault check asks its slot's event anyway, which a
// faulted context answers with its error. Counted with the simulated driver's per-thread call counts.
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <catch2/catch.hpp>

#include "own_context.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <chrono>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;

namespace {
long calls_here(const char* entry) {
  const long n = test::simulated_calls_here(entry);
  REQUIRE(n >= 0);
  return n;
}
long event_queries_here() { return calls_here("cuEventQuery"); }

constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_trap() { ret; }
.visible .entry sim_sleep_ms(.param .u32 ms) { ret; }
)";

// Passes until `done` holds `n` completions or `limit` passed.
void pass_until(completion_queues& queues, std::vector<completed_wait>& done, std::size_t n,
                std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (done.size() < n && std::chrono::steady_clock::now() < until) {
    queues.pass(false, done);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}
}  // namespace

TEST_CASE("passes over lone waits whose host words are still to come ask their events only when a fault check is due",
          "[.simulated][engine]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  constexpr int n = 16;
  using clock = std::chrono::steady_clock;
  // The engine asks a pending word's event every 500 us (fault_check_period_ns). A thread descheduled longer than
  // that on a loaded machine makes an early pass a due one: such an attempt is dropped and the case tried again (at
  // most 5 times); only an attempt whose passes kept to their timing is checked, and one must.
  constexpr auto period_margin = std::chrono::microseconds(400);
  bool checked = false;
  for (int attempt = 0; attempt < 5 && !checked; ++attempt) {
    test::sim_gate gate(ctx);
    std::vector<stream> streams;
    for (int i = 0; i < n; ++i) {
      streams.push_back(stream::create(ctx));
      gate.close(streams.back());
    }
    poll_policy p = poll_policy::balanced();
    p.watchdog = std::chrono::hours(1);  // no full pass: those ask every event
    completion_queues queues(p);
    // The pool's words made ready first, as a runtime does on its grower thread: a pool grows them in the background
    // (a slot made before they come has none).
    event_pool::for_context(ctx)->prepare(n);
    auto& source = cuda_completion_source::instance();
    const std::uint64_t words_before = source.host_word_waits();
    std::vector<std::unique_ptr<queued_wait>> waits;
    for (stream& s : streams) {
      waits.push_back(std::make_unique<queued_wait>());
      REQUIRE(queues.add(source.target(source.record(s), nullptr), waits.back().get()));
    }
    REQUIRE(source.host_word_waits() - words_before == n);  // each wait alone on its stream: a word each
    std::vector<completed_wait> done;
    auto finish = [&] {  // the gate opens: every wait completes (by loads alone, checked on a kept attempt)
      gate.open();
      for (stream& s : streams) s.synchronize();
      const long at_open = event_queries_here();
      queues.pass(false, done);
      return event_queries_here() - at_open;
    };

    // Passes in quick succession: plain loads of pending words, no event asked (the first pass only notes the time).
    const long before = event_queries_here();
    const auto started = clock::now();
    int passes = 0;
    while (clock::now() - started < std::chrono::microseconds(200)) {
      queues.pass(false, done);
      ++passes;
    }
    const bool quick_kept = clock::now() - started < period_margin;
    const long quick_queries = event_queries_here() - before;
    const bool quick_done = done.empty();

    // Past the period: one pass asks each pending wait's event once (the fault check), then quiet again.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const long at_check = event_queries_here();
    const auto check_started = clock::now();
    queues.pass(false, done);
    const long first_check = event_queries_here() - at_check;
    queues.pass(false, done);
    const bool check_kept = clock::now() - check_started < period_margin;
    const long both_checks = event_queries_here() - at_check;
    const bool check_done = done.empty();
    const long open_queries = finish();
    if (!quick_kept || !check_kept) {
      WARN("attempt " << attempt << ": this thread was descheduled past the fault-check period; tried again");
      continue;
    }
    CHECK(passes > 1);
    CHECK(quick_done);
    CHECK(quick_queries == 0);
    CHECK(first_check == n);
    CHECK(both_checks == n);
    CHECK(check_done);
    // The gate opened: the words were written; a pass completed every wait with loads alone.
    CHECK(done.size() == n);
    CHECK(open_queries == 0);
    checked = true;
  }
  REQUIRE(checked);
}

TEST_CASE("a wait whose host word stands alone records no event; its word completes it and a fault still reaches it",
          "[.simulated][engine]") {
  CUASYNC_SIMULATED_ONLY();
  test::own_context own;  // the fault makes it unusable: no other case shares it
  auto& source = cuda_completion_source::instance();
  source.use_host_words(true);
  source.use_words_alone(true);
  struct words_alone_default {
    ~words_alone_default() { cuda_completion_source::instance().use_words_alone(true); }
  } restore;
  {
    const context_ref ctx = own.ref();
    module m = module::load(ctx, std::string_view(sim_ptx), "word_alone_sim.ptx");
    stream s = stream::create(ctx);
    event_pool::for_context(ctx)->prepare(4);  // words ready (a pool grows them in the background)
    poll_policy p = poll_policy::balanced();
    p.watchdog = std::chrono::hours(1);
    completion_queues queues(p);
    std::vector<completed_wait> done;
    queued_wait first, trapped;

    // Alone on its stream: a word, no event. The word's write completes it.
    const std::uint64_t words = source.host_word_waits();
    const long records = calls_here("cuEventRecord");
    launch(s, m.kernel("sim_sleep_ms"), {.grid = 1, .block = 1}, std::uint32_t{200});
    REQUIRE(queues.add(source.record_wait(s, admission_ticket()), &first));
    CHECK(source.host_word_waits() - words == 1);
    CHECK(calls_here("cuEventRecord") - records == 0);
    // Still running past the fault-check period: the check asks the slot's event, which (not recorded for this
    // wait) says nothing but an error: the wait stays pending.
    const long queries = event_queries_here();
    queues.pass(false, done);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    queues.pass(false, done);
    CHECK(event_queries_here() - queries == 1);
    CHECK(done.empty());
    pass_until(queues, done, 1, std::chrono::seconds(10));
    REQUIRE(done.size() == 1);
    CHECK(done[0].wait == &first);
    CHECK_FALSE(done[0].error);
    // The pooled event that `record` hands out (a stream may wait on it) is recorded beside its word all the same.
    source.record(s).event().synchronize();
    CHECK(calls_here("cuEventRecord") - records == 1);

    // A trap: the word is never written; the fault check's query of the slot's event (never recorded for this wait)
    // brings the context's error.
    launch(s, m.kernel("sim_sleep_ms"), {.grid = 1, .block = 1}, std::uint32_t{100});  // the trap after the record
    launch(s, m.kernel("sim_trap"), {.grid = 1, .block = 1});
    REQUIRE(queues.add(source.record_wait(s, admission_ticket()), &trapped));
    CHECK(calls_here("cuEventRecord") - records == 1);
    pass_until(queues, done, 2, std::chrono::seconds(10));
    REQUIRE(done.size() == 2);
    CHECK(done[1].wait == &trapped);
    CHECK(done[1].error == make_error_code(CUDA_ERROR_LAUNCH_FAILED));
  }
}
