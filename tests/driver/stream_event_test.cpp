// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/event.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <thread>

using namespace cuasync;
using test::ctx;
using test::kernels;

TEST_CASE("streams are non-blocking by default and keep their priority", "[driver][stream][gpu]") {
  stream s = stream::create(ctx());
  CHECK(s.flags() == CU_STREAM_NON_BLOCKING);
  auto [least, greatest] = ctx().stream_priority_range();
  stream hi = stream::create(ctx(), {.priority = greatest});
  CHECK(hi.priority() == greatest);
  stream blocking = stream::create(ctx(), {.non_blocking = false});
  CHECK(blocking.flags() == CU_STREAM_DEFAULT);
  CHECK(s.query());
  CHECK(s.context() == ctx());
  // Ids are unique and not reused after a stream is destroyed, unlike handles.
  const unsigned long long first = s.id();
  CHECK(first != hi.id());
  s = stream::create(ctx());
  CHECK(s.id() != first);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("stream order is kept: work after a gate waits for it", "[driver][stream][gpu][concurrent]") {
  stream s = stream::create(ctx());
  pinned_buffer host = pinned_buffer::allocate(ctx(), sizeof(int) * 256);
  device_buffer dev = device_buffer::allocate(ctx(), sizeof(int) * 256);
  std::fill_n(host.data<int>(), 256, -1);
  test::gate g;
  g.close(s);
  launch(s, kernels().kernel("fill_iota"), {.grid = 1, .block = 256}, dev.data<int>(), 256, 1000);
  copy_async(s, host.bytes(), dev.span());
  event done = event::create(ctx());
  done.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The gate holds the stream: nothing after it has run, and the host buffer is untouched.
  CHECK_FALSE(done.query());
  CHECK_FALSE(s.query());
  CHECK(host.data<int>()[0] == -1);
  g.open();
  s.synchronize();
  CHECK(done.query());
  for (int i = 0; i < 256; ++i) REQUIRE(host.data<int>()[i] == 1000 + i);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("a stream waits on an event recorded on another stream", "[driver][stream][event][gpu][concurrent]") {
  stream a = stream::create(ctx()), b = stream::create(ctx());
  const int n = 4096;
  device_buffer x = device_buffer::allocate(ctx(), n * sizeof(int));
  device_buffer y = device_buffer::allocate(ctx(), n * sizeof(int));
  pinned_buffer out = pinned_buffer::allocate(ctx(), n * sizeof(int));
  event written = event::create(ctx());
  test::gate g;
  g.close(a);  // a cannot produce x until the gate opens
  launch(a, kernels().kernel("fill_iota"), {.grid = n / 256, .block = 256}, x.data<int>(), n, 7);
  written.record(a);
  b.wait(written);  // without this wait, b would read x before it is written
  launch(b, kernels().kernel("twice_plus_one"), {.grid = n / 256, .block = 256}, x.data<int>(), y.data<int>(), n);
  copy_async(b, out.bytes(), y.span());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_FALSE(b.query());  // b is held by the event, which is held by the gate
  g.open();
  b.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(out.data<int>()[i] == (7 + i) * 2 + 1);
}

// [timing]: asserts the measured time of a 2 ms kernel stays under 200 ms.
TEST_CASE("events: timing off by default, timing events measure", "[driver][event][gpu][timing]") {
  stream s = stream::create(ctx());
  event plain = event::create(ctx());
  plain.record(s);
  plain.synchronize();
  CHECK(plain.query());
  CHECK_THROWS_WITH(event_ref::elapsed_ms(plain, plain), Catch::Contains("timing events"));
  event t0 = event::create(ctx(), {.timing = true}), t1 = event::create(ctx(), {.timing = true});
  t0.record(s);
  launch(s, kernels().kernel("sleep_ns"), {.grid = 1, .block = 1}, 2'000'000ull);  // 2 ms
  t1.record(s);
  t1.synchronize();
  const float ms = event_ref::elapsed_ms(t0, t1);
  CHECK(ms >= 1.9f);
  CHECK(ms < 200.f);
}

TEST_CASE("a host function runs after the work before it", "[driver][stream][gpu]") {
  stream s = stream::create(ctx());
  std::atomic<int> calls{0};
  launch(s, kernels().kernel("sleep_ns"), {.grid = 1, .block = 1}, 1'000'000ull);
  s.launch_host_func([](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }, &calls);
  s.synchronize();
  CHECK(calls.load() == 1);
}

TEST_CASE("a stream created by raw cu* calls is adopted without ownership", "[driver][stream][gpu]") {
  const auto& d = detail::driver();
  CUstream raw = nullptr;
  {
    scoped_context guard(ctx());
    REQUIRE(d.cuStreamCreateWithPriority(&raw, CU_STREAM_NON_BLOCKING, 0) == CUDA_SUCCESS);
  }
  {
    stream_ref adopted = stream_ref::adopt(raw);
    CHECK(adopted.get() == raw);
    CHECK(adopted.context() == ctx());
    device_buffer buf = device_buffer::allocate(ctx(), 64 * sizeof(int));
    launch(adopted, kernels().kernel("fill_iota"), {.grid = 1, .block = 64}, buf.data<int>(), 64, 5);
    std::vector<int> host(64);
    copy_async(adopted, std::as_writable_bytes(std::span(host)), buf.span());
    adopted.synchronize();
    CHECK(host[63] == 68);
  }
  // Still ours to destroy: the ref did not own it.
  CHECK(d.cuStreamQuery(raw) == CUDA_SUCCESS);
  CHECK(d.cuStreamDestroy(raw) == CUDA_SUCCESS);
  CHECK_THROWS_WITH(stream_ref::adopt(nullptr), Catch::Contains("legacy default stream"));
}
