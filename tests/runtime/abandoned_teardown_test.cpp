// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Teardown while the device never goes idle (a kernel that never ends): a runtime's destructor hands its pinned
// frees to the reaper and waits for them only within a bound; the reaper makes them once the work ends, skips a free
// whose context's life ended first, and holds one handed over in a deferred_until_scope until it is ready. On the simulated driver, whose cuMemFreeHost waits until the device is
// idle and whose closed gate holds it (CTest runtime_cold_paths_simulated).
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/detail/grower.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "own_context.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"
#include "trace_recording.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;
using namespace std::chrono_literals;

TEST_CASE("a runtime torn down while a kernel never ends returns within the bound; its pinned memory is freed once "
          "the kernel ends",
          "[runtime][cold][teardown][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const context_ref c = test::ctx();
  drain_deferred_frees();  // what earlier cases handed over is settled: the counts below are this case's
  std::future<void> torn_down;  // declared first, so destroyed last: after the gate below opened
  stream s = stream::create(c);
  test::sim_gate gate(c);
  device_runtime_options reserving;
  reserving.reserve_pageable_staging = true;
  auto rt = device_runtime::create(0, reserving);
  const std::size_t chunks = reserving.pageable.cold_chunks * reserving.pageable.cold_copies_reserved, words = 4;
  const std::size_t reserved = chunks * reserving.pageable.cold_chunk_bytes + words * 4096;
  for (int i = 0; i < 5000 && rt->pinned()->stats().bytes_idle < reserved; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(rt->pinned()->stats().bytes_idle == reserved);
  // The reservation's task holds the pinned pool until it ends: a teardown before then left the pool to the grower,
  // whose frees were handed over after the counts below (ASan, 1 run in 90).
  detail::grower_thread().drain();
  gate.close(s);  // cuMemFreeHost waits until this is done
  const deferred_free_stats before = deferred_frees();
  const auto start = std::chrono::steady_clock::now();
  torn_down = std::async(std::launch::async, [r = std::move(rt)]() mutable { r.reset(); });
  // Made on the tearing-down thread, the frees would wait for the gate, which opens only below.
  REQUIRE(torn_down.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - start < teardown_free_wait + 2s);
  const deferred_free_stats after = deferred_frees();
  const std::uint64_t handed = after.handed_over - before.handed_over;
  CHECK(handed >= chunks + words);  // and the event pool's slabs, if this was its last user
  CHECK(after.done == before.done);  // the reaper is the one waiting
  CHECK(after.abandoned == before.abandoned + 1);
  // A second teardown wait for the same life returns at once.
  const auto again = std::chrono::steady_clock::now();
  CHECK_FALSE(drain_deferred_frees_of(c.get()));
  CHECK(std::chrono::steady_clock::now() - again < 500ms);
  gate.open();
  drain_deferred_frees();
  CHECK(drain_deferred_frees_of(c.get()));  // settled: the life is no longer abandoned
  const deferred_free_stats end = deferred_frees();
  CHECK(end.done == before.done + handed);
  CHECK(end.skipped == before.skipped);  // the context lives on: made, not skipped
}

namespace {
std::atomic<bool> blocker_running{false}, blocker_released{false};
// A "free" that holds the reaper until the test lets it go.
CUresult hold_the_reaper(const detail::driver_entry_points&, const void*, std::size_t) {
  blocker_running = true;
  while (!blocker_released) std::this_thread::sleep_for(1ms);
  return CUDA_SUCCESS;
}
}  // namespace

TEST_CASE("the reaper skips a free whose context's life ended before its turn",
          "[runtime][cold][teardown][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  test::own_context own;
  pinned_buffer p = pinned_buffer::allocate(own.ref(), 4096);
  const deferred_free_stats before = deferred_frees();
  blocker_running = blocker_released = false;
  {
    must_not_block_scope io_thread;
    detail::release_blocking_nothrow(test::ctx().get(), 0, "hold_the_reaper", nullptr, 0, hold_the_reaper);
    p = pinned_buffer();  // handed over behind the blocker
  }
  for (int i = 0; i < 5000 && !blocker_running; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(blocker_running);
  CHECK(own.destroy() == CUDA_SUCCESS);  // its memory goes with it, before the reaper's turn
  blocker_released = true;
  drain_deferred_frees();
  const deferred_free_stats after = deferred_frees();
  CHECK(after.handed_over == before.handed_over + 2);
  CHECK(after.done == before.done + 2);
  CHECK(after.skipped == before.skipped + 1);
}

TEST_CASE("a primary context's release while a traced kernel never ends returns within the bound",
          "[runtime][cold][teardown][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const context_ref c = test::ctx();
  std::future<void> released;  // declared first, so destroyed last: after the gate below opened
  stream s = stream::create(c);
  test::sim_gate gate(c);
  primary_context extra = primary_context::retain(0);
  test::trace_recording recording;
  gate.close(s);  // traced: the GPU span collector waits for its end event when the context is released
  const auto start = std::chrono::steady_clock::now();
  released = std::async(std::launch::async, [p = std::move(extra)]() mutable { p = primary_context(); });
  REQUIRE(released.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - start < teardown_free_wait + 2s);
}

TEST_CASE("a free handed over in a deferred_until_scope is held on the reaper, without a driver call, until ready",
          "[runtime][cold][teardown][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  drain_deferred_frees();
  pinned_buffer p = pinned_buffer::allocate(test::ctx(), 4096);
  const long live = test::simulated_live_objects("pinned_host");
  const deferred_free_stats before = deferred_frees();
  std::atomic<bool> go{false};
  {
    deferred_until_scope teardown([&go] { return go.load(); });
    CHECK(thread_must_not_block());
    p = pinned_buffer();
  }
  CHECK_FALSE(thread_must_not_block());
  std::this_thread::sleep_for(100ms);
  CHECK(deferred_frees().done == before.done);
  CHECK(test::simulated_live_objects("pinned_host") == live);  // no cuMemFreeHost yet, though the device is idle
  go = true;
  drain_deferred_frees();
  CHECK(deferred_frees().done == before.done + 1);
  CHECK(deferred_frees().skipped == before.skipped);
  CHECK(test::simulated_live_objects("pinned_host") == live - 1);
}
