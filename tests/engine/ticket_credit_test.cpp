// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Admission credits (cuda_completion_source::try_admit_n), on the simulated driver (hidden [.simulated]: CTest
// engine_misuse_simulated runs them there): several places taken in one call, bounded by the stream's room and a
// quarter of the context's, never past an operation waiting for admission, given back together or split for a record.
// (Named to sort after gpu_span_pump_test.cpp: a wait recorded before that test in the same process, as misuse_test's
// does too, makes its count of the poller's wake-ups fail.)
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "simulated_driver.hpp"

#include <atomic>
#include <thread>
#include <vector>

using namespace cuasync;
using Catch::Contains;
using test::error_of;
using namespace std::chrono_literals;

namespace {
// The context's admission limits for the test's length.
struct limits_scope {
  std::shared_ptr<event_pool> pool;
  admission_limits saved;
  limits_scope(std::shared_ptr<event_pool> p, admission_limits l) : pool(std::move(p)), saved(pool->get_admission_limits()) {
    pool->set_admission_limits(l);
  }
  ~limits_scope() { pool->set_admission_limits(saved); }
};

struct admitted_flag final : admission_waiter {
  std::atomic<bool> admitted_now{false};
  admission_ticket ticket;
  void admitted(admission_ticket t) noexcept override {
    ticket = std::move(t);
    admitted_now = true;
  }
};

// Two streams of device 0 and their admission sites.
struct two_streams {
  primary_context ctx = primary_context::retain(0);
  cuda_completion_source& source = cuda_completion_source::instance();
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  stream a = stream::create(ctx), b = stream::create(ctx);
  admission_site site_a = source.site_of(a), site_b = source.site_of(b);
  struct : completion_callback {
    std::atomic<bool> done{false};
    void complete(std::error_code) noexcept override { done = true; }
  } seen;  // a recorded place's wait
};

// Places come back when the poller sees their events: waits for the context's count to reach `n`.
bool admitted_becomes(const event_pool& pool, std::uint32_t n) {
  for (int i = 0; i < 10'000 && pool.admitted() != n; ++i) std::this_thread::sleep_for(1ms);
  return pool.admitted() == n;
}
}  // namespace

TEST_CASE("admission credits (try_admit_n)", "[.simulated][engine][admission]") {
  CUASYNC_SIMULATED_ONLY();
  two_streams f;
  auto& [ctx, source, pool, a, b, site_a, site_b, seen] = f;
  SECTION("up to n places in one call, within the stream's room and a quarter of the context's") {
    {
      limits_scope limits(pool, {.per_stream = 64, .per_context = 500});
      admission_ticket credit = source.try_admit_n(site_a, 16);
      REQUIRE(credit);
      CHECK(credit.count() == 16);
      CHECK(pool->admitted() == 16);
      // Split: the places move, none is taken or given back.
      admission_ticket one = credit.split(1);
      CHECK(one.count() == 1);
      CHECK(credit.count() == 15);
      CHECK(pool->admitted() == 16);
      CHECK_THAT(error_of([&] { (void)credit.split(15); }).detail(), Contains("leave at least one"));
      // A credit is not recorded as one place: refused, its places given back.
      admission_ticket two = credit.split(2);
      CHECK_THAT(error_of([&] { (void)source.record(a, std::move(two)); }).detail(), Contains("holds 2 places"));
      CHECK(pool->admitted() == 14);
      // The split-off place is recorded and comes back with its event; the credit's with reset.
      completion_callbacks::instance().wait(source.record(a, std::move(one)).into_target(), &f.seen);
    for (int i = 0; i < 10'000 && !f.seen.done; ++i) std::this_thread::sleep_for(1ms);
    CHECK(f.seen.done);
    CHECK(admitted_becomes(*pool, 13));
      CHECK(credit.count() == 13);
      credit.reset();
      CHECK(credit.count() == 0);
      CHECK(pool->admitted() == 0);
    }
    {
      // The stream's room: 10 of its 20 places taken one by one leave a credit of 10.
      limits_scope limits(pool, {.per_stream = 20, .per_context = 500});
      std::vector<admission_ticket> singles;
      for (int i = 0; i < 10; ++i) singles.push_back(source.try_admit(site_a));
      admission_ticket credit = source.try_admit_n(site_a, 16);
      CHECK(credit.count() == 10);
      CHECK_FALSE(source.try_admit_n(site_a, 16));  // the stream is full
      // Absorbing another credit of the same stream adds its places.
      singles.pop_back();
      credit.absorb(source.try_admit_n(site_a, 16));
      CHECK(credit.count() == 11);
      CHECK(pool->admitted() == 20);
    }
    CHECK(pool->admitted() == 0);
    {
      // The context's room: a quarter of what is left (at least one), so that credits never take its last places.
      limits_scope limits(pool, {.per_stream = 40, .per_context = 40});
      admission_ticket c1 = source.try_admit_n(site_a, 16);
      CHECK(c1.count() == 10);  // 40 / 4
      admission_ticket c2 = source.try_admit_n(site_b, 16);
      CHECK(c2.count() == 7);  // 30 / 4
      std::vector<admission_ticket> rest;
      while (admission_ticket t = source.try_admit_n(site_b, 16)) rest.push_back(std::move(t));
      CHECK(pool->admitted() == 40);
      CHECK(rest.back().count() == 1);
    }
    CHECK(pool->admitted() == 0);
  }
  SECTION("never past an operation waiting for admission; its holder is told one waits") {
    limits_scope limits(pool, {.per_stream = 2, .per_context = 500});
    admission_ticket credit_b = source.try_admit_n(site_b, 16);
    REQUIRE(credit_b.count() == 2);
    CHECK_FALSE(credit_b.others_waiting());
    admission_ticket full = source.try_admit_n(site_a, 16);
    REQUIRE(full.count() == 2);
    admitted_flag w;
    source.wait_admission(a, &w);  // a is full: w waits
    CHECK_FALSE(w.admitted_now);
    CHECK(credit_b.others_waiting());  // b's holder must give its unused places back, not use them past w
    CHECK_FALSE(source.try_admit_n(site_a, 16));  // a's FIFO: w first
    credit_b.reset();
    CHECK_FALSE(source.try_admit_n(site_b, 1));  // the context's: nobody passes a waiter
    full.split(1).reset();                       // one place of a back: w is admitted
    CHECK(w.admitted_now);
    CHECK(w.ticket.count() == 1);
    CHECK_FALSE(full.others_waiting());
    w.ticket.reset();
    full.reset();
    CHECK(pool->admitted() == 0);
  }
}
