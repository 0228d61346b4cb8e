// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Cold paths off the threads that await: blocking frees on the reaper, pinned memory allocated on the background
// thread (the staging ring, pool misses of asynchronous callers). CTest runtime_cold_paths_simulated runs them on
// the simulated driver; on the GPU they run with the other [gpu] cases.
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/trace/recorder.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"
#include "trace_recording.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

using namespace cuasync;
using namespace cuasync::runtime;
using namespace std::chrono_literals;

namespace {
// The lanes of the spans named `call` of `bytes` recorded so far.
std::vector<trace::lane> lanes_of(std::string_view call, std::size_t bytes) {
  std::vector<trace::lane> lanes;
  for (const trace::span& s : trace::snapshot().spans)
    if (s.name == call && s.bytes == bytes) lanes.push_back(s.lane);
  return lanes;
}

struct copy_done final : staged_copy_callback {
  std::promise<std::error_code> result;
  void done(std::error_code ec, std::exception_ptr) noexcept override { result.set_value(ec); }
};
}  // namespace

TEST_CASE("device and pinned buffers destroyed on a thread that must not block are freed on the reaper, after the "
          "work ahead of them",
          "[runtime][cold][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const context_ref c = test::ctx();
  stream s = stream::create(c);
  test::sim_gate gate(c);
  device_buffer d = device_buffer::allocate(c, 4096);
  pinned_buffer p = pinned_buffer::allocate(c, 4096);
  gate.close(s);  // cuMemFree and cuMemFreeHost wait until this is done
  const deferred_free_stats before = deferred_frees();
  auto destroyed = std::async(std::launch::async, [&] {
    must_not_block_scope io_thread;
    device_buffer gone_d = std::move(d);
    pinned_buffer gone_p = std::move(p);
  });
  // Made here, either free would wait for the gate, which opens only below.
  REQUIRE(destroyed.wait_for(10s) == std::future_status::ready);
  CHECK(deferred_frees().handed_over == before.handed_over + 2);
  std::this_thread::sleep_for(50ms);
  CHECK(deferred_frees().done == before.done);  // the reaper is the one waiting
  gate.open();
  drain_deferred_frees();
  CHECK(deferred_frees().done == before.done + 2);
  // Unmarked, the thread frees itself again.
  CHECK_FALSE(thread_must_not_block());
  device_buffer here = device_buffer::allocate(c, 4096);
  here = device_buffer();
  CHECK(deferred_frees().handed_over == before.handed_over + 2);
}

TEST_CASE("a staged copier allocates its ring on the background thread, a block per slot, and a copy started first "
          "waits for it",
          "[runtime][cold][gpu]") {
  const context_ref c = test::ctx();
  stream s = stream::create(c);
  constexpr std::size_t chunk = std::size_t{1} << 20;
  const bool to_device = GENERATE(true, false);
  CAPTURE(to_device);
  test::trace_recording recording;
  staged_copier copier(c, {.chunk_bytes = chunk, .chunks = 3});
  const std::size_t size = 5 * chunk + 3;
  const auto src = test::random_bytes(size, 7);
  device_buffer dev = device_buffer::allocate(c, size);
  std::vector<std::byte> back(size);
  copy_done done;
  if (to_device) {
    copier.start_to_device(s, dev.span(), src, &done);
  } else {
    copy_async(s, dev.span(), std::span<const std::byte>(src));  // the driver's pageable copy: fine here
    copier.start_to_host(s, back, dev.span(), &done);
  }
  auto result = done.result.get_future();
  REQUIRE(result.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(result.get());
  if (to_device) {
    copy_async(s, std::span<std::byte>(back), dev.span());
    s.synchronize();
  }
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  // One block per slot, none larger than a chunk (a pinned allocation may hold other threads' driver calls), none
  // on this thread.
  // (Made by registration or not: CTest runtime_pinned_by_registration_simulated runs the other way.)
  const char* allocation = pinned_blocks_registered() ? "cuMemHostRegister" : "cuMemHostAlloc";
  const auto lanes = lanes_of(allocation, chunk);
  REQUIRE(lanes.size() == 3);
  for (const trace::lane& l : lanes) CHECK(l != trace::this_thread_lane());
  CHECK(lanes_of(allocation, 3 * chunk).empty());
}

TEST_CASE("a pinned pool's asynchronous allocation hits here and misses on the background thread",
          "[runtime][cold][gpu]") {
  auto rt = device_runtime::create(0, {.pinned_cap_bytes = std::size_t{64} << 20});
  const std::thread::id here = std::this_thread::get_id();
  std::promise<std::thread::id> missed_on;
  rt->pinned()->allocate_async(std::size_t{3} << 20, [&](pinned_block b, std::exception_ptr e) {
    CHECK(b.size() == std::size_t{3} << 20);
    CHECK_FALSE(e);
    missed_on.set_value(std::this_thread::get_id());
  });  // the block goes back idle with the callback's argument
  auto f = missed_on.get_future();
  REQUIRE(f.wait_for(30s) == std::future_status::ready);
  CHECK(f.get() != here);
  // The callback's block goes back idle after the callback has returned (on that thread): wait for it (seen missing
  // under ThreadSanitizer's timing).
  for (int i = 0; i < 3000 && rt->pinned()->stats().bytes_in_use > 0; ++i) std::this_thread::sleep_for(1ms);
  bool hit = false;
  rt->pinned()->allocate_async(std::size_t{3} << 20, [&](pinned_block b, std::exception_ptr) {
    hit = b && std::this_thread::get_id() == here;
  });
  CHECK(hit);  // idle: called in the call
  std::promise<std::exception_ptr> refused;
  rt->pinned()->allocate_async(std::size_t{128} << 20, [&](pinned_block b, std::exception_ptr e) {
    CHECK_FALSE(b);
    refused.set_value(e);
  });
  auto r = refused.get_future();
  REQUIRE(r.wait_for(30s) == std::future_status::ready);
  CHECK_THROWS_AS(std::rethrow_exception(r.get()), cuda_error);  // past the cap, as allocate
  // Warm-up: a block of its size class allocated there, then a hit.
  rt->pinned()->warm_async(std::size_t{5} << 20);
  for (int i = 0; i < 3000 && !rt->pinned()->try_allocate(std::size_t{5} << 20); ++i)
    std::this_thread::sleep_for(1ms);
  CHECK(rt->pinned()->try_allocate(std::size_t{5} << 20));
  CHECK_FALSE(rt->pinned()->try_allocate(std::size_t{9} << 20));  // never allocated: a miss, and nothing allocated
}

TEST_CASE("the background threads' pinned allocations and frees leave another thread's global-mode capture valid",
          "[runtime][cold][capture][gpu]") {
  // In global mode any thread's allocation or free of pinned memory invalidates the capture (as torch.cuda.graph's):
  // the grower and the reaper make theirs in relaxed mode (on the H100 a replay anchor's capture in the GPU
  // conformance suite was invalidated by a background allocation).
  const context_ref c = test::ctx();
  auto rt = device_runtime::create(0, {.pinned_cap_bytes = std::size_t{64} << 20});
  stream s = stream::create(c);
  pinned_buffer freed_later = pinned_buffer::allocate(c, 4096);
  REQUIRE(detail::driver().cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  std::promise<std::exception_ptr> grown;
  rt->pinned()->allocate_async(std::size_t{7} << 20, [&](pinned_block, std::exception_ptr e) { grown.set_value(e); });
  auto g = grown.get_future();
  const bool grew = g.wait_for(30s) == std::future_status::ready;
  const bool grew_ok = grew && !g.get();
  std::async(std::launch::async, [&] {
    must_not_block_scope io_thread;  // the free goes to the reaper
    pinned_buffer gone = std::move(freed_later);
  }).wait();
  drain_deferred_frees();
  CUgraph graph = nullptr;
  const CUresult ended = detail::driver().cuStreamEndCapture(s.get(), &graph);
  if (graph) detail::driver().cuGraphDestroy(graph);
  CHECK(grew_ok);
  CHECK(ended == CUDA_SUCCESS);
  CHECK(graph != nullptr);
}

TEST_CASE("a pinned buffer made by registration copies both ways and is freed by unregistering, on the reaper too",
          "[runtime][cold][gpu]") {
  const context_ref c = test::ctx();
  stream s = stream::create(c);
  drain_deferred_frees();  // earlier cases' frees settled first
  // Counted on the simulated driver only (-1 on a real one), and not while the runtime's own pinned blocks are
  // registered too (runtime::pinned_blocks_registered(): earlier runtimes' blocks may still be on their way out).
  const long before = pinned_blocks_registered() ? -1 : test::simulated_live_objects("registered_host");
  constexpr std::size_t bytes = 10000;  // not a whole number of pages
  {
    pinned_buffer p = pinned_buffer::allocate_registered(c, bytes);
    CHECK(p.registered());
    CHECK(p.size() == bytes);
    CHECK(is_pinned(p.get()));
    CHECK(p.device_pointer() != 0);
    if (before >= 0) CHECK(test::simulated_live_objects("registered_host") == before + 1);
    for (std::size_t i = 0; i < bytes; ++i) p.data<unsigned char>()[i] = static_cast<unsigned char>(i * 7);
    device_buffer d = device_buffer::allocate(c, bytes);
    copy_async(s, d.span(), std::span<const std::byte>(p.bytes()));
    pinned_buffer q = pinned_buffer::allocate_registered(c, bytes);
    copy_async(s, q.bytes(), d.span());
    s.synchronize();
    CHECK(std::memcmp(q.get(), p.get(), bytes) == 0);
  }
  if (before >= 0) CHECK(test::simulated_live_objects("registered_host") == before);
  // Destroyed on a thread that must not block: unregistered (and its memory freed) on the reaper.
  pinned_buffer r = pinned_buffer::allocate_registered(c, bytes);
  const deferred_free_stats frees = deferred_frees();
  std::async(std::launch::async, [&] {
    must_not_block_scope io_thread;
    pinned_buffer gone = std::move(r);
  }).wait();
  drain_deferred_frees();
  // At least this one: a background thread may hand over frees of earlier cases' objects meanwhile (an ASan run of
  // CI's saw 23 where 22 were counted). The registered objects' count says exactly that this one is gone.
  CHECK(deferred_frees().handed_over >= frees.handed_over + 1);
  CHECK(deferred_frees().done >= frees.done + 1);
  if (before >= 0) CHECK(test::simulated_live_objects("registered_host") == before);
  CHECK_THROWS_WITH(pinned_buffer::allocate_registered(c, 0), Catch::Contains("zero-byte allocation"));
}

TEST_CASE("CUASYNC_WHOLE_BLOCK_UP_TO_MIB sets the whole-block bound of runtimes created after it; a bad value is "
          "ignored",
          "[runtime][cold][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const std::size_t default_bound = pageable_copy_policy{}.whole_block_up_to_bytes;
  struct unset_at_end {
    ~unset_at_end() { ::unsetenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB"); }
  } unset;
  ::setenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB", "0", 1);
  CHECK(device_runtime::create(0)->options().pageable.whole_block_up_to_bytes == 0);
  ::setenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB", "64", 1);
  CHECK(device_runtime::create(0)->options().pageable.whole_block_up_to_bytes == std::size_t{64} << 20);
  ::setenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB", "64MB", 1);
  CHECK(device_runtime::create(0)->options().pageable.whole_block_up_to_bytes == default_bound);
  ::unsetenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB");
  CHECK(device_runtime::create(0)->options().pageable.whole_block_up_to_bytes == default_bound);
}

// A driver that refuses registration (CUDA_ERROR_NOT_SUPPORTED: some virtual machines) gets cuMemHostAlloc'd blocks
// instead, from then on. Run by CTest runtime_pinned_registration_refused_simulated, whose simulated driver fails
// the process's first cuMemHostRegister (FAKE_CUDA_FAIL); skipped elsewhere.
TEST_CASE("pinned blocks fall back to cuMemHostAlloc where the driver refuses registration",
          "[runtime][cold][.registration_refused]") {
  const char* fail = std::getenv("FAKE_CUDA_FAIL");
  if (!test::simulated_driver_loaded() || !fail || std::string_view(fail).rfind("cuMemHostRegister:", 0) != 0) {
    WARN("skipped: needs the simulated driver with FAKE_CUDA_FAIL=cuMemHostRegister:1:801 (its CTest entry)");
    return;
  }
  REQUIRE(pinned_blocks_registered());
  auto set_phase = reinterpret_cast<void (*)(int)>(test::simulated_driver_symbol("fake_cuda_set_phase"));
  REQUIRE(set_phase);
  set_phase(1);  // injected failures count from here: the next cuMemHostRegister is refused
  const long pinned_before = test::simulated_live_objects("pinned_host");
  pinned_buffer refused = allocate_pinned_block(test::ctx(), 5000);  // the refused registration, then the fallback
  CHECK_FALSE(refused.registered());
  CHECK_FALSE(pinned_blocks_registered());
  CHECK(test::simulated_live_objects("pinned_host") == pinned_before + 1);
  pinned_buffer next = allocate_pinned_block(test::ctx(), 5000);  // no second try
  CHECK_FALSE(next.registered());
  CHECK(is_pinned(next.get()));
  set_phase(0);
}

// Registered host memory is its own mapping, not inherited by a forked child (as the driver's pinned memory): after
// a fork, a copy-on-write of a registered page would leave the parent's writes where the device does not look.
TEST_CASE("a pinned buffer made by registration is not inherited by a forked child", "[runtime][cold][gpu]") {
  pinned_buffer p = pinned_buffer::allocate_registered(test::ctx(), std::size_t{3} << 20);  // huge pages too
  p.data<unsigned char>()[0] = 7;
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not the test main's stack printer
    const volatile unsigned char* at = p.data<unsigned char>();
    ::_exit(at[0] == 7 ? 0 : 3);  // faults: the range is not mapped here
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // Killed by the fault (or, under AddressSanitizer, ended by its report); never through the read.
  INFO("child status " << status);
  CHECK_FALSE((WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3)));
  CHECK(p.data<unsigned char>()[0] == 7);  // the parent's is untouched
}
