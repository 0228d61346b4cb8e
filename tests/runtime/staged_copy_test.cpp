// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/copy.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("staged pageable copies are byte-exact at every size and offset", "[runtime][staged][gpu]") {
  auto rt = device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  const std::size_t size = GENERATE(std::size_t{1}, std::size_t{4097}, std::size_t{(4 << 20) + 3},
                                    std::size_t{1} << 30);
  const std::size_t offset = GENERATE(std::size_t{0}, std::size_t{3});
  CAPTURE(size, offset);
  const auto src = test::random_bytes(size + offset, static_cast<unsigned>(size * 7 + offset));
  device_buffer d = device_buffer::allocate(rt->context(), size + 16);
  std::vector<std::byte> back(size + offset + 8, std::byte{0});
  staged_copier& staging = rt->staging();
  staging.copy_to_device(s, d.subspan(offset, size), std::span(src).subspan(offset, size));
  staging.copy_to_host(s, std::span(back).subspan(offset, size), d.subspan(offset, size));
  CHECK(std::memcmp(back.data() + offset, src.data() + offset, size) == 0);
  // Bytes around the range are untouched.
  CHECK(back[offset + size] == std::byte{0});
  if (offset) CHECK(back[offset - 1] == std::byte{0});
}

TEST_CASE("runtime copies stage large pageable memory and count it", "[runtime][staged][gpu]") {
  auto rt = device_runtime::create(0);
  stream s = stream::create(rt->context());
  const std::size_t size = 64 << 20;  // above the staging threshold
  const auto src = test::random_bytes(size);
  std::vector<std::byte> back(size);
  device_buffer d = device_buffer::allocate(rt->context(), size);
  copy_async(*rt, s, d.span(), std::span<const std::byte>(src));   // staged
  copy_async(*rt, s, std::span<std::byte>(back), d.span());         // staged
  s.synchronize();
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  CHECK(rt->stats().staged_copies == 2);
  std::vector<std::byte> small(1000);  // below the threshold
  copy_async(*rt, s, std::span<std::byte>(small), d.subspan(0, 1000));  // small: straight to the driver
  copy_async(*rt, s, std::span<std::byte>(back), d.span(), {.stage_pageable = false});
  s.synchronize();
  CHECK(rt->stats().staged_copies == 2);
  CHECK(rt->stats().pageable_copies == 2);
  CHECK(std::memcmp(small.data(), src.data(), 1000) == 0);
  CHECK_THROWS_WITH(rt->staging().copy_to_device(s, d.subspan(0, 10), std::span<const std::byte>(src).first(11)),
                    Catch::Contains("copy of 11 bytes into a destination of 10 bytes"));
}

namespace {
// Owns the copier it reports for, and destroys it in `done` (as a keep-alive holding the last reference to a runtime
// does), on the thread that completes the copy.
struct destroying_callback final : staged_copy_callback {
  std::unique_ptr<staged_copier> copier;
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::error_code error;
  void enqueued() noexcept override {}
  void done(std::error_code ec, std::exception_ptr) noexcept override {
    copier.reset();
    std::lock_guard lock(mutex);
    error = ec;
    finished = true;
    cv.notify_all();
  }
};
}  // namespace

TEST_CASE("a staged copier destroyed in its own done callback lets the copy finish and nothing wait forever",
          "[runtime][staged][gpu]") {
  stream s = stream::create(test::ctx());
  const std::size_t size = (8 << 20) + 5;  // several chunks of the default ring
  const auto src = test::random_bytes(size);
  device_buffer d = device_buffer::allocate(test::ctx(), size);
  destroying_callback cb;
  cb.copier = std::make_unique<staged_copier>(test::ctx(), staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 3});
  cb.copier->start_to_device(s, d.span(), std::span<const std::byte>(src), &cb);
  {
    std::unique_lock lock(cb.mutex);
    REQUIRE(cb.cv.wait_for(lock, std::chrono::seconds(30), [&] { return cb.finished; }));
  }
  CHECK_FALSE(cb.error);
  CHECK(cb.copier == nullptr);
  std::vector<std::byte> back(size);
  copy_async(s, std::span<std::byte>(back), d.span());  // pageable: the driver's copy returns once it is done
  s.synchronize();
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
}

TEST_CASE("a staged copier destroyed in a device-to-host done call on its copy thread lets that thread go",
          "[runtime][staged][gpu]") {
  stream s = stream::create(test::ctx());
  const std::size_t size = (8 << 20) + 5;
  const auto src = test::random_bytes(size);
  device_buffer d = device_buffer::allocate(test::ctx(), size);
  copy_async(s, d.span(), std::span<const std::byte>(src));
  s.synchronize();
  std::vector<std::byte> back(size);
  destroying_callback cb;
  cb.copier = std::make_unique<staged_copier>(test::ctx(), staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 3});
  cb.copier->start_to_host(s, std::span<std::byte>(back), d.span(), &cb);  // done comes from a copy thread
  {
    std::unique_lock lock(cb.mutex);
    REQUIRE(cb.cv.wait_for(lock, std::chrono::seconds(30), [&] { return cb.finished; }));
  }
  CHECK_FALSE(cb.error);
  CHECK(cb.copier == nullptr);
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
}

// The destructor called from a `done` waits for the other threads' callback frames; each frame's end must tell it,
// not only the last one (a notification at zero frames only never came while the waiting thread's own frame counted:
// ~2% of the two cases above hung, session 23). Many fresh copiers, each destroyed in its done call, both ways: the
// grower thread's frame (the ring's growth) and the copy threads' overlap the done call in some of them.
TEST_CASE("staged copiers destroyed in their done calls, over and over, each let the copy finish",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  stream s = stream::create(test::ctx());
  const std::size_t size = (3 << 20) + 5;
  const auto src = test::random_bytes(size);
  device_buffer d = device_buffer::allocate(test::ctx(), size);
  std::vector<std::byte> back(size);
  for (int round = 0; round < 40; ++round) {
    destroying_callback cb;
    cb.copier = std::make_unique<staged_copier>(test::ctx(), staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 3});
    const bool to_device = round % 2 == 0;
    if (to_device)
      cb.copier->start_to_device(s, d.span(), std::span<const std::byte>(src), &cb);
    else
      cb.copier->start_to_host(s, std::span<std::byte>(back), d.span(), &cb);
    std::unique_lock lock(cb.mutex);
    INFO("round " << round << (to_device ? ", to the device" : ", to the host"));
    REQUIRE(cb.cv.wait_for(lock, std::chrono::seconds(20), [&] { return cb.finished; }));
    CHECK_FALSE(cb.error);
  }
  s.synchronize();
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
}

// ---- Sharing the ring between streams (staged_copy.hpp, "Sharing") ----

namespace {
// Hears one copy's `done`; a test waits for it with a time limit, so a copy held where it should not be fails the
// test instead of hanging it.
struct copy_done final : staged_copy_callback {
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::error_code error;
  void done(std::error_code ec, std::exception_ptr) noexcept override {
    std::lock_guard lock(mutex);
    error = ec;
    finished = true;
    cv.notify_all();
  }
  bool wait_for(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, limit, [&] { return finished; });
  }
  bool has_finished() {
    std::lock_guard lock(mutex);
    return finished;
  }
};

// Opens a gate when the test leaves its scope early (a failed REQUIRE): declared after the copier, it is destroyed
// first, so the copier's destructor does not wait forever for copies behind the gate.
template <class Gate>
struct opens_at_exit {
  Gate& gate;
  ~opens_at_exit() { gate.open(); }
};

constexpr auto held_limit = std::chrono::seconds(10);  // what the copy that must not wait gets (it takes ms)
constexpr auto finish_limit = std::chrono::seconds(60);

// A copy on a stream held behind a gate must not keep a copy on another, idle stream out of the ring: the idle one
// completes while the gate is still closed. Both copies have more chunks than the ring has slots; before the fix
// the busy copy's DMAs (D2H) or filled chunks (H2D) took every slot and waited behind the gate.
template <class Gate>
void idle_stream_copy_passes_a_gated_one(context_ref ctx, Gate& gate, bool to_device) {
  copy_done busy_copy, idle_copy;
  stream busy = stream::create(ctx), idle = stream::create(ctx);
  const std::size_t busy_size = (6 << 20) + 5, idle_size = (5 << 20) + 3;
  const auto busy_src = test::random_bytes(busy_size, 11), idle_src = test::random_bytes(idle_size, 12);
  std::vector<std::byte> busy_back(busy_size), idle_back(idle_size);
  device_buffer busy_dev = device_buffer::allocate(ctx, busy_size), idle_dev = device_buffer::allocate(ctx, idle_size);
  staged_copier copier(ctx, staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 4});
  if (!to_device) {
    copier.copy_to_device(busy, busy_dev.span(), std::span<const std::byte>(busy_src));
    copier.copy_to_device(idle, idle_dev.span(), std::span<const std::byte>(idle_src));
    busy.synchronize();
    idle.synchronize();
  }
  gate.close(busy);
  opens_at_exit<Gate> opener{gate};
  if (to_device) {
    copier.start_to_device(busy, busy_dev.span(), std::span<const std::byte>(busy_src), &busy_copy);
    copier.start_to_device(idle, idle_dev.span(), std::span<const std::byte>(idle_src), &idle_copy);
  } else {
    copier.start_to_host(busy, std::span<std::byte>(busy_back), busy_dev.span(), &busy_copy);
    copier.start_to_host(idle, std::span<std::byte>(idle_back), idle_dev.span(), &idle_copy);
  }
  const bool idle_finished_first = idle_copy.wait_for(held_limit);
  const bool busy_still_held = !busy_copy.has_finished();
  gate.open();
  REQUIRE(busy_copy.wait_for(finish_limit));
  REQUIRE(idle_copy.wait_for(finish_limit));
  CHECK(idle_finished_first);
  CHECK(busy_still_held);
  CHECK_FALSE(busy_copy.error);
  CHECK_FALSE(idle_copy.error);
  if (to_device) {
    copier.copy_to_host(busy, std::span<std::byte>(busy_back), busy_dev.span());
    copier.copy_to_host(idle, std::span<std::byte>(idle_back), idle_dev.span());
  }
  CHECK(std::memcmp(busy_back.data(), busy_src.data(), busy_size) == 0);
  CHECK(std::memcmp(idle_back.data(), idle_src.data(), idle_size) == 0);
}

// Copies on one stream keep their order, even when the first waits behind a gate and another stream's copy runs
// meanwhile: two host-to-device copies into the same destination leave the second one's bytes.
template <class Gate>
void copies_on_one_stream_keep_their_order(context_ref ctx, Gate& gate) {
  copy_done first, second, elsewhere;
  stream s = stream::create(ctx), other = stream::create(ctx);
  const std::size_t size = (5 << 20) + 7;
  const auto first_src = test::random_bytes(size, 21), second_src = test::random_bytes(size, 22),
             other_src = test::random_bytes(size, 23);
  device_buffer dst = device_buffer::allocate(ctx, size), other_dst = device_buffer::allocate(ctx, size);
  staged_copier copier(ctx, staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 4});
  gate.close(s);
  opens_at_exit<Gate> opener{gate};
  copier.start_to_device(s, dst.span(), std::span<const std::byte>(first_src), &first);
  copier.start_to_device(s, dst.span(), std::span<const std::byte>(second_src), &second);
  copier.start_to_device(other, other_dst.span(), std::span<const std::byte>(other_src), &elsewhere);
  const bool elsewhere_finished_first = elsewhere.wait_for(held_limit);
  gate.open();
  REQUIRE(first.wait_for(finish_limit));
  REQUIRE(second.wait_for(finish_limit));
  REQUIRE(elsewhere.wait_for(finish_limit));
  CHECK(elsewhere_finished_first);
  CHECK_FALSE(first.error);
  CHECK_FALSE(second.error);
  std::vector<std::byte> back(size);
  copier.copy_to_host(s, std::span<std::byte>(back), dst.span());
  CHECK(std::memcmp(back.data(), second_src.data(), size) == 0);
  copier.copy_to_host(other, std::span<std::byte>(back), other_dst.span());
  CHECK(std::memcmp(back.data(), other_src.data(), size) == 0);
}

using test::sim_gate;
// A copy stays listed in the copier after its DMAs are done while its `enqueued` call has not returned (or while its
// chunks drain): it says nothing of its stream any more. A later copy on that stream, started behind a kernel, must
// ask the stream rather than inherit the earlier copy's "not busy": inheriting it, the later copy took every ring
// slot behind the kernel and a copy on an idle stream waited for the kernel. Here the earlier copy (one chunk, device
// to host) is held in its `enqueued` call, on a thread of its own, until the end.
struct held_in_enqueued final : staged_copy_callback {
  copy_done finished;
  std::mutex mutex;
  std::condition_variable cv;
  bool entered = false, released = false;
  void enqueued() noexcept override {
    std::unique_lock lock(mutex);
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(120), [&] { return released; });
  }
  void done(std::error_code ec, std::exception_ptr d) noexcept override { finished.done(ec, d); }
  bool wait_entered(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, limit, [&] { return entered; });
  }
  void release() {
    std::lock_guard lock(mutex);
    released = true;
    cv.notify_all();
  }
};

template <class Gate>
void copy_behind_a_finished_one_asks_its_stream(context_ref ctx, Gate& gate) {
  stream s = stream::create(ctx), other = stream::create(ctx);
  const std::size_t size = (5 << 20) + 3;
  const auto src = test::random_bytes(size, 31), other_src = test::random_bytes(size, 32);
  std::vector<std::byte> back(size), first_back(64);
  device_buffer dev = device_buffer::allocate(ctx, size), other_dev = device_buffer::allocate(ctx, size);
  staged_copier copier(ctx, staged_copy_options{.chunk_bytes = 1 << 20, .chunks = 4});
  held_in_enqueued first;
  std::thread starter([&] { copier.start_to_host(s, std::span<std::byte>(first_back), dev.subspan(0, 64), &first); });
  struct releases_at_exit {  // before the copier's destructor, which waits for the held call
    held_in_enqueued& cb;
    std::thread& t;
    ~releases_at_exit() {
      cb.release();
      if (t.joinable()) t.join();
    }
  } releaser{first, starter};
  REQUIRE(first.wait_entered(held_limit));
  // Its DMA is done on the device; two blocking copies on another stream make sure the poller has also delivered
  // that completion to the copier (each completes in a later pass than the one before it).
  while (!s.query()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  copier.copy_to_host(other, std::span<std::byte>(back).first(64), other_dev.subspan(0, 64));
  copier.copy_to_host(other, std::span<std::byte>(back).first(64), other_dev.subspan(0, 64));
  REQUIRE_FALSE(first.finished.has_finished());  // still listed: held in `enqueued`

  copy_done behind, elsewhere;
  gate.close(s);
  opens_at_exit<Gate> opener{gate};
  copier.start_to_device(s, dev.span(), std::span<const std::byte>(src), &behind);
  copier.start_to_device(other, other_dev.span(), std::span<const std::byte>(other_src), &elsewhere);
  const bool elsewhere_finished_first = elsewhere.wait_for(held_limit);
  const bool behind_still_held = !behind.has_finished();
  gate.open();
  first.release();
  REQUIRE(behind.wait_for(finish_limit));
  REQUIRE(elsewhere.wait_for(finish_limit));
  REQUIRE(first.finished.wait_for(finish_limit));
  CHECK(elsewhere_finished_first);
  CHECK(behind_still_held);
  CHECK_FALSE(behind.error);
  CHECK_FALSE(elsewhere.error);
  CHECK_FALSE(first.finished.error);
  copier.copy_to_host(s, std::span<std::byte>(back), dev.span());
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  copier.copy_to_host(other, std::span<std::byte>(back), other_dev.span());
  CHECK(std::memcmp(back.data(), other_src.data(), size) == 0);
}

}  // namespace

TEST_CASE("a staged copy on an idle stream completes while another stream's staged copy waits behind a kernel",
          "[runtime][staged][gpu][concurrent]") {
  const bool to_device = GENERATE(false, true);
  CAPTURE(to_device);
  test::gate gate;
  idle_stream_copy_passes_a_gated_one(test::ctx(), gate, to_device);
}

TEST_CASE("staged copies on one stream keep their order while another stream's copy passes them",
          "[runtime][staged][gpu][concurrent]") {
  test::gate gate;
  copies_on_one_stream_keep_their_order(test::ctx(), gate);
}

// The same on the simulated driver (CTest runtime_staged_sharing_simulated): its gate kernel exists nowhere else.
TEST_CASE("a staged copy on an idle stream completes while another stream's staged copy waits behind a gate "
          "(simulated)",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const bool to_device = GENERATE(false, true);
  CAPTURE(to_device);
  sim_gate gate(test::ctx());
  idle_stream_copy_passes_a_gated_one(test::ctx(), gate, to_device);
}

TEST_CASE("staged copies on one stream keep their order while another stream's copy passes them (simulated)",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  sim_gate gate(test::ctx());
  copies_on_one_stream_keep_their_order(test::ctx(), gate);
}

TEST_CASE("a staged copy behind a finished copy on its stream asks the stream, and leaves the ring to an idle stream",
          "[runtime][staged][gpu][concurrent]") {
  test::gate gate;
  copy_behind_a_finished_one_asks_its_stream(test::ctx(), gate);
}

TEST_CASE("a staged copy behind a finished copy on its stream asks the stream, and leaves the ring to an idle stream "
          "(simulated)",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  sim_gate gate(test::ctx());
  copy_behind_a_finished_one_asks_its_stream(test::ctx(), gate);
}

namespace {
// A synchronous staged copy copies the team's parts on its own thread while it waits (staged_copy_options::
// caller_copies): with the team's one thread held inside another job's done call, copies both ways still complete,
// byte-exact, before that thread is let go. Without the caller's help they would wait for it (a watchdog lets it go
// after 30 s, and the check fails).
void sync_copies_copy_on_their_caller(context_ref ctx) {
  auto team = std::make_shared<memcpy_team>(1);
  auto entered = std::make_shared<std::promise<void>>();
  auto go = std::make_shared<std::promise<void>>();
  std::shared_future<void> go_seen = go->get_future().share();
  std::vector<std::byte> tiny_src(64, std::byte{1}), tiny_dst(64);
  team->submit(tiny_dst.data(), tiny_src.data(), tiny_src.size(), false, [entered, go_seen] {
    entered->set_value();
    go_seen.wait();
  });
  REQUIRE(entered->get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  std::atomic<bool> let_go_by_watchdog{false};
  std::promise<void> copies_done;
  std::thread watchdog([&, finished = copies_done.get_future()]() mutable {
    if (finished.wait_for(std::chrono::seconds(30)) == std::future_status::ready) return;
    let_go_by_watchdog = true;
    go->set_value();
  });
  bool exact = false;
  {
    staged_copy_options o;
    o.chunk_bytes = std::size_t{1} << 20;
    o.chunks = 2;
    staged_copier c(ctx, o, team);
    stream s = stream::create(ctx);
    const auto src = test::random_bytes((5 << 20) + 3, 11);
    device_buffer d = device_buffer::allocate(ctx, src.size());
    std::vector<std::byte> back(src.size());
    c.copy_to_device(s, d.span(), std::span<const std::byte>(src));
    c.copy_to_host(s, std::span<std::byte>(back), d.span());
    exact = std::memcmp(back.data(), src.data(), src.size()) == 0;
    copies_done.set_value();
    watchdog.join();
    if (!let_go_by_watchdog) go->set_value();
  }
  CHECK_FALSE(let_go_by_watchdog);
  CHECK(exact);
}
}  // namespace

TEST_CASE("a synchronous staged copy copies on its caller's thread while the team is busy", "[runtime][staged][gpu]") {
  sync_copies_copy_on_their_caller(test::ctx());
}

TEST_CASE("a synchronous staged copy copies on its caller's thread while the team is busy (simulated)",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  sync_copies_copy_on_their_caller(test::ctx());
}

namespace {
// Copies below `half_chunks_below` go through half blocks, larger ones through whole blocks (both halves): both kinds
// at once on two streams, both ways, byte-exact. 64 KiB blocks, two: a 200 KiB copy is 7 chunks of 32 KiB, a 1 MiB
// copy 17 of 64 KiB, so each needs the ring many times over, and the whole-chunk copy waits for whole blocks while
// the half-chunk one holds halves.
void whole_and_half_chunks_share_the_ring(context_ref ctx) {
  staged_copier copier(ctx, staged_copy_options{.chunk_bytes = 64 << 10, .chunks = 2, .half_chunks_below = 256 << 10});
  stream a = stream::create(ctx), b = stream::create(ctx);
  const std::size_t small = (200 << 10) + 3, large = (1 << 20) + 7;
  const auto src_small = test::random_bytes(small, 1), src_large = test::random_bytes(large, 2);
  device_buffer d_small = device_buffer::allocate(ctx, small), d_large = device_buffer::allocate(ctx, large);
  std::vector<std::byte> back_small(small), back_large(large);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    {
      copy_done small_done, large_done;
      copier.start_to_device(a, d_small.span(), std::span<const std::byte>(src_small), &small_done);
      copier.start_to_device(b, d_large.span(), std::span<const std::byte>(src_large), &large_done);
      REQUIRE(small_done.wait_for(finish_limit));
      REQUIRE(large_done.wait_for(finish_limit));
      CHECK_FALSE(small_done.error);
      CHECK_FALSE(large_done.error);
    }
    {
      copy_done small_done, large_done;
      copier.start_to_host(b, std::span<std::byte>(back_large), d_large.span(), &large_done);
      copier.start_to_host(a, std::span<std::byte>(back_small), d_small.span(), &small_done);
      REQUIRE(small_done.wait_for(finish_limit));
      REQUIRE(large_done.wait_for(finish_limit));
      CHECK_FALSE(small_done.error);
      CHECK_FALSE(large_done.error);
    }
    CHECK(std::memcmp(back_small.data(), src_small.data(), small) == 0);
    CHECK(std::memcmp(back_large.data(), src_large.data(), large) == 0);
    std::memset(back_small.data(), 0, small);
    std::memset(back_large.data(), 0, large);
  }
}
}  // namespace

TEST_CASE("copies with whole and with half chunks share the ring, both ways, byte-exact", "[runtime][staged][gpu]") {
  whole_and_half_chunks_share_the_ring(test::ctx());
}

TEST_CASE("copies with whole and with half chunks share the ring, both ways, byte-exact (simulated)",
          "[runtime][staged][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  whole_and_half_chunks_share_the_ring(test::ctx());
}
