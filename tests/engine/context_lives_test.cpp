// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A primary context released fully and retained again is a new context with (on the simulated driver, and often on
// a real one) the same handle: the event pool of its first life must not be handed out for the second. Before the
// fix event_pool::for_context matched the handle alone, so a record through it failed with CUDA_ERROR_INVALID_HANDLE
// (the first life's event) and the failure path's synchronize then waited for a stream held behind a gate: a hang.
// The case runs in a child process with a time limit, so that a hang fails the test instead of stalling the suite.
#include <cuasync/driver/detail/grower.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "simulated_driver.hpp"

#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <string_view>

using namespace cuasync;
using Catch::Contains;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
)";
}  // namespace

// Run by the case below in a child process (a fresh loader: nothing else retains device 0's primary context).
TEST_CASE("context second life child", "[.context_second_life_child]") {
  CUASYNC_CHILD_ONLY();
  CUcontext first_handle = nullptr;
  unsigned long long first_id = 0;
  std::weak_ptr<event_pool> first_pool;
  {
    primary_context ctx = primary_context::retain(0);
    first_handle = ctx.get();
    first_id = ctx.id();
    std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
    stream s = stream::create(ctx);
    pool->record(s).query();  // the pool now owns an event of this life
    s.synchronize();
    first_pool = pool;
  }  // the last retain is released: the context is gone; no sweep happens between here and the next for_context (the
     // release settled the pool's growth that the record asked for; the pool stays registered, held above)
  primary_context ctx = primary_context::retain(0);
  std::printf("CHILD same_handle=%d new_id=%d\n", ctx.get() == first_handle, ctx.id() != first_id);
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  CHECK(pool != first_pool.lock());
  CHECK(pool->context().get() == ctx.get());
  module m = module::load(ctx, std::string_view(sim_ptx), "second_life_gate.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 0;
  stream s = stream::create(ctx);
  struct opens_gate {  // on every way out: the context's release waits for s's work
    unsigned* flag;
    ~opens_gate() { std::atomic_ref(*flag).store(1); }
  } gate{flag.data<unsigned>()};
  launch(s, m.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>());  // s cannot finish yet
  pooled_event e = pool->record(s);  // before the fix: CUDA_ERROR_INVALID_HANDLE, then a wait for the gate
  CHECK_FALSE(e.query());           // behind the gate
  std::atomic_ref(*flag.data<unsigned>()).store(1);
  s.synchronize();
  CHECK(e.query());
  std::printf("CHILD recorded\n");
}

TEST_CASE("a primary context retained again after its full release gets a new event pool, without a sweep",
          "[.simulated][engine][lifetime]") {
  CUASYNC_SIMULATED_ONLY();
  const test::child_result r = test::run_child({"context second life child"}, {}, std::chrono::seconds(60));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("CHILD same_handle=1 new_id=1"));  // what makes the case meaningful
  CHECK_THAT(r.output, Contains("CHILD recorded"));
}

// Run by the case below in a child process. Buffers that outlive their context's life (its last retain released: the
// context took their memory along) are not freed when they go, above all not once the handle has a second life: the
// free failed there, and the failure was reported at the second life's next synchronize (seen as a flaky child exit
// when the grower's slab outlived a first life), or it would free what the second life put at the address.
TEST_CASE("buffer second life child", "[.buffer_second_life_child]") {
  CUASYNC_CHILD_ONLY();
  std::optional<pinned_buffer> old_pinned, old_registered;
  std::optional<device_buffer> old_device;
  {
    primary_context ctx = primary_context::retain(0);
    old_pinned.emplace(pinned_buffer::allocate(ctx, 4096));
    old_registered.emplace(pinned_buffer::allocate_registered(ctx, 4096));
    old_device.emplace(device_buffer::allocate(ctx, 4096));
  }  // the last retain is released: the context and its memory are gone
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  const long host_frees = test::simulated_calls_here("cuMemFreeHost"),
             unregisters = test::simulated_calls_here("cuMemHostUnregister"),
             device_frees = test::simulated_calls_here("cuMemFree");
  old_pinned.reset();
  old_registered.reset();
  old_device.reset();
  CHECK(test::simulated_calls_here("cuMemFreeHost") == host_frees);
  CHECK(test::simulated_calls_here("cuMemHostUnregister") == unregisters);
  CHECK(test::simulated_calls_here("cuMemFree") == device_frees);
  CHECK_NOTHROW(s.synchronize());  // no failure of the first life reported in the second
  {
    pinned_buffer now = pinned_buffer::allocate(ctx, 4096);
    device_buffer now_device = device_buffer::allocate(ctx, 4096);
  }  // the second life's own buffers are freed as ever
  CHECK(test::simulated_calls_here("cuMemFreeHost") == host_frees + 1);
  CHECK(test::simulated_calls_here("cuMemFree") == device_frees + 1);
  CHECK_NOTHROW(s.synchronize());
  std::printf("CHILD freed\n");
}

TEST_CASE("buffers that outlive their context's life are not freed in its next life",
          "[.simulated][engine][lifetime]") {
  CUASYNC_SIMULATED_ONLY();
  const test::child_result r = test::run_child({"buffer second life child"}, {}, std::chrono::seconds(60));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Contains("CHILD freed"));
}

// A growth of the pool's host words still queued on the grower when cuasync releases a primary context, or when
// release_if_unused is called, does nothing once it runs (the context may be gone by then: the slab's zeroing wrote
// into memory the context's release had freed), and a pool still in use asks again.
TEST_CASE("a pool's queued growth is settled by a primary context's release and by release_if_unused",
          "[.simulated][engine][lifetime]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  event_pool::release_if_unused(ctx);  // a pool of its own for this case
  stream s = stream::create(ctx);
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  const long before = test::simulated_live_pinned();
  for (bool by_release : {true, false}) {
    INFO((by_release ? "a primary context's release" : "release_if_unused"));
    std::promise<void> open;
    REQUIRE(detail::grower_thread().post([opened = open.get_future().share()] { opened.wait(); }));  // holds it
    { pooled_event e = pool->record(s); }  // a slot without a word: it asks the grower for a slab of words
    if (by_release) {
      primary_context another = primary_context::retain(0);
    }  // not the last retain: the hook runs all the same (no runtime uses the pool)
    else
      event_pool::release_if_unused(ctx);  // returns at once (the growth has not started); held: not dropped
    open.set_value();
    detail::grower_thread().drain();
    CHECK(test::simulated_live_pinned() == before);  // no slab was made
  }
  { pooled_event e = pool->record(s); }  // its slot, given back without a word, asks again
  detail::grower_thread().drain();
  CHECK(test::simulated_live_pinned() == before + 1);  // the slab, this time
  s.synchronize();
}
