// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// State that lives as long as what it describes: runtimes and contexts created and torn down again and again leave
// no event pools behind and keep host memory flat.
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/detail/grower.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
long rounds() {
  const char* v = std::getenv("CUASYNC_TEARDOWN_ROUNDS");
  return v ? std::atol(v) : 1000;
}

std::size_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

struct callback_wait final : completion_callback {
  std::promise<std::error_code> result;
  void complete(std::error_code ec) noexcept override { result.set_value(ec); }
};

// Some of everything a runtime keeps per context: streams, a pooled allocation, a wait (an event from the context's
// pool, maybe a host word) seen complete by the engine, a staged-size copy is left out (its ring is per runtime).
void use(device_runtime& rt) {
  stream_ref s = rt.streams().next();
  auto buffer = tracked_buffer::allocate(rt, s, 4096);
  pinned_block block = rt.pinned()->allocate(4096);
  callback_wait w;
  completion_callbacks::instance().wait(cuda_completion_source::instance().record(s).into_target(), &w);
  REQUIRE_FALSE(w.result.get_future().get());
  s.synchronize();
}
// A context of its own on device 0, not left current (cuasync makes it current where it needs it).
CUcontext created_context() {
  const auto& d = detail::driver();
  CUdevice dev = 0;
  detail::check(d.cuDeviceGet(&dev, 0), "cuDeviceGet", std::source_location::current());
  CUcontext raw = nullptr;
  detail::check(d.cuCtxCreate(&raw, 0, dev), "cuCtxCreate", std::source_location::current());
  CUcontext popped = nullptr;
  d.cuCtxPopCurrent(&popped);
  return raw;
}

// The two ways a context's runtimes come, for the cases that run on both: the primary context (runtimes made by
// `create`, with a retain of the case's own so that the context outlives them) or a context of the case's own
// (runtimes adopting it), destroyed at the end.
struct runtimes_of_a_context {
  bool primary;
  std::optional<primary_context> kept;
  CUcontext raw = nullptr;
  explicit runtimes_of_a_context(bool on_primary) : primary(on_primary) {
    if (primary) {
      kept.emplace(primary_context::retain(0));
      event_pool::release_if_unused(*kept);  // a pool of its own for this case
    } else {
      raw = created_context();
    }
  }
  ~runtimes_of_a_context() {
    if (raw) (void)detail::driver().cuCtxDestroy(raw);
  }
  const char* what() const {
    return primary ? "the primary context, runtimes made by create" : "a created context, runtimes adopting it";
  }
  std::shared_ptr<device_runtime> make(const device_runtime_options& o = {.streams_per_priority = 1}) const {
    return primary ? device_runtime::create(0, o) : device_runtime::adopt(context_ref::adopt(raw), o);
  }
};
}  // namespace

// [timing]: 1,020 contexts created and destroyed, each with a runtime and a wait.
TEST_CASE("1,000 runtimes on created contexts come and go: no event pools left, host memory flat",
          "[runtime][gpu][teardown][timing]") {
  const auto& d = detail::driver();
  const std::size_t pools = event_pool::live_pools();
  auto round = [&] {
    CUcontext raw = created_context();
    {
      auto rt = device_runtime::adopt(context_ref::adopt(raw), {.streams_per_priority = 1});
      use(*rt);
    }
    detail::check(d.cuCtxDestroy(raw), "cuCtxDestroy", std::source_location::current());
  };
  const long n = rounds();
  for (int i = 0; i < 20; ++i) round();  // warm-up: the allocator's arenas, the driver's own caches
  const std::size_t before = resident_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) round();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::size_t after = resident_bytes();
  event_pool::sweep();
  std::printf("teardown: %ld contexts with a runtime each in %.1f s; resident %.1f -> %.1f MiB; pools %zu -> %zu\n",
              n, s, before / 1048576.0, after / 1048576.0, pools, event_pool::live_pools());
  CHECK(event_pool::live_pools() == pools);
  // Flat: a leak of even 4 KiB a round would show as 4 MiB.
  CHECK(after < before + (std::size_t{2} << 20));
}

TEST_CASE("the last runtime of a context frees its event pool and host words before letting the context go",
          "[runtime][gpu][teardown][api_error]") {
  const auto& d = detail::driver();
  CUcontext raw = created_context();
  const std::size_t pools = event_pool::live_pools();
  {
    auto rt = device_runtime::adopt(context_ref::adopt(raw), {.streams_per_priority = 1});
    use(*rt);
    REQUIRE(event_pool::live_pools() == pools + 1);  // (the engine gives a wait's event back before its callback)
  }
  // Gone while the context is alive (its pinned words freed by cuasync, not left to the context's end).
  CHECK(event_pool::live_pools() == pools);
  detail::check(d.cuCtxDestroy(raw), "cuCtxDestroy", std::source_location::current());
}

// A loan still out as the last runtime goes (a completion being delivered, an event the caller holds): the pool was
// left in the registry with its events and pinned words until the context's end (fault injection counted them as
// leaked, now and then). It goes with the loan now, while the context is still alive.
TEST_CASE("a loan still out as the last runtime goes: the event pool goes with the loan", "[runtime][gpu][teardown][cold]") {
  const auto& d = detail::driver();
  CUcontext raw = created_context();
  const std::size_t pools = event_pool::live_pools();
  std::optional<stream> s;
  std::optional<pooled_event> held;
  {
    auto rt = device_runtime::adopt(context_ref::adopt(raw), {.streams_per_priority = 1});
    use(*rt);
    s.emplace(stream::create(rt->context()));
    held.emplace(event_pool::for_context(rt->context())->record(*s));
  }
  // The grower's task for the pool's words (settled by the teardown: it does nothing) holds the pool for a moment
  // while it runs; done with, so that the loan is the last holder here.
  detail::grower_thread().drain();
  CHECK(event_pool::live_pools() == pools + 1);  // held by the loan
  held.reset();
  // Given back without a host word (the runtime's going settled the growth it had asked for), the slot asks the
  // grower for a slab again: the grower's task holds the pool while it runs, and drops it as it ends (CI's ASan run
  // counted the pool here, once, while that task held it).
  detail::grower_thread().drain();
  CHECK(event_pool::live_pools() == pools);  // and gone with it
  {  // a runtime of the context afterwards gets a pool of its own, and lets it go as usual
    auto rt = device_runtime::adopt(context_ref::adopt(raw), {.streams_per_priority = 1});
    use(*rt);
    CHECK(event_pool::live_pools() == pools + 1);
  }
  detail::grower_thread().drain();  // (a task holding the pool as the runtime went drops it as it ends)
  CHECK(event_pool::live_pools() == pools);
  s.reset();
  detail::check(d.cuCtxDestroy(raw), "cuCtxDestroy", std::source_location::current());
}

// Two runtimes of one context: the one that goes first leaves the pool to the other. Its going settled the pool's
// background work (the other's slab of host words, asked for and queued, never came: its waits went by event queries)
// and marked the pool for its last holder, so that each give-back of the runtime that stayed took the registry's lock.
// On the primary context the first runtime's going also releases its retain, which is not the last: that release
// left the pool alone too.
TEST_CASE("a runtime that goes while another of its context stays leaves the pool to it",
          "[.simulated][runtime][teardown][cold]") {
  CUASYNC_SIMULATED_ONLY();
  for (bool primary : {false, true}) {
    const runtimes_of_a_context c(primary);
    INFO(c.what());
    const std::size_t pools = event_pool::live_pools();
    auto stays = c.make();
    auto goes = c.make();
    REQUIRE(stays->events() == goes->events());
    REQUIRE(stays->events()->created() == 0);  // a new pool: its first slot asks for a slab
    REQUIRE(event_pool::live_pools() == pools + 1);
    detail::grower_thread().drain();
    drain_deferred_frees();  // what earlier cases left to the reaper is not counted as this case's
    const long pinned = test::simulated_live_pinned();
    std::promise<void> open;
    REQUIRE(detail::grower_thread().post([opened = open.get_future().share()] { opened.wait(); }));  // holds it
    stream_ref s = stays->streams().next();
    { pooled_event e = stays->events()->record(s); }  // a slot without a word: the grower is asked for a slab
    goes.reset();
    open.set_value();
    detail::grower_thread().drain();
    CHECK(test::simulated_live_pinned() == pinned + 1);  // the slab came
    CHECK(event_pool::live_pools() == pools + 1);
    s.synchronize();
    stays.reset();  // the last runtime: the pool and its slab go before the context
    detail::grower_thread().drain();
    CHECK(event_pool::live_pools() == pools);
    CHECK(test::simulated_live_pinned() == pinned);
  }
}

// A runtime whose construction fails after it has handed work to the background (its first events' slab and the
// pinned reservation, queued on the grower; a bad staging ring refused by the warm-up after them): what it queued
// ends with it. Nothing of it is left (no pool, no pinned memory, once the grower and the reaper are done), and the
// context's next runtime works.
TEST_CASE("a runtime whose construction fails after its background work was queued leaves nothing behind",
          "[.simulated][runtime][teardown][cold]") {
  CUASYNC_SIMULATED_ONLY();
  device_runtime_options broken{.streams_per_priority = 1};
  broken.staging.chunks = 1;  // refused by the staging ring: "needs at least 2 chunks"
  broken.reserve_pageable_staging = true;
  broken.warm_up_staging = true;
  for (bool primary : {false, true}) {
    const runtimes_of_a_context c(primary);
    INFO(c.what());
    detail::grower_thread().drain();
    drain_deferred_frees();  // what earlier cases left to the reaper is not counted as this case's
    const std::size_t pools = event_pool::live_pools();
    const long pinned = test::simulated_live_pinned();
    CHECK_THROWS_AS(c.make(broken), cuda_error);
    detail::grower_thread().drain();
    drain_deferred_frees();
    CHECK(event_pool::live_pools() == pools);
    CHECK(test::simulated_live_pinned() == pinned);
    {
      auto rt = c.make();
      use(*rt);
    }
    detail::grower_thread().drain();
    drain_deferred_frees();
    CHECK(event_pool::live_pools() == pools);
    CHECK(test::simulated_live_pinned() == pinned);
  }
}

// [timing]: 1,020 runtimes created and destroyed, each with a wait.
TEST_CASE("1,000 runtimes on the primary context come and go: one event pool, host memory flat",
          "[runtime][gpu][teardown][timing]") {
  {
    auto warm = device_runtime::create(0);
    use(*warm);
  }
  const std::size_t pools = event_pool::live_pools();
  auto round = [] {
    auto rt = device_runtime::create(0);
    use(*rt);
  };
  for (int i = 0; i < 20; ++i) round();
  const std::size_t before = resident_bytes();
  const long n = rounds();
  for (long i = 0; i < n; ++i) round();
  const std::size_t after = resident_bytes();
  std::printf("teardown: %ld primary-context runtimes; resident %.1f -> %.1f MiB; pools %zu -> %zu\n", n,
              before / 1048576.0, after / 1048576.0, pools, event_pool::live_pools());
  CHECK(event_pool::live_pools() == pools);
  CHECK(after < before + (std::size_t{2} << 20));
}
