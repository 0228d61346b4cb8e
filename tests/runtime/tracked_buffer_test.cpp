// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/launch.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "gpu.hpp"

#include <cstring>
#include <thread>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
constexpr int n = 1 << 16;
launch_config grid() { return {.grid = n / 256, .block = 256}; }
}  // namespace

// [concurrent]: the control section synchronizes stream B's kernel while a gate kernel still spins on stream A.
TEST_CASE("a buffer written on stream A and read on stream B: B waits for A", "[runtime][hazard][gpu][concurrent]") {
  auto rt = device_runtime::for_device(0);
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  tracked_buffer x = tracked_buffer::allocate(*rt, a, n * sizeof(int));
  tracked_buffer y = tracked_buffer::allocate(*rt, b, n * sizeof(int));
  // Pinned: a device-to-host copy into pageable memory blocks the host until it is done, which would
  // deadlock behind the gate.
  pinned_block out_block = rt->pinned()->allocate(n * sizeof(int));
  std::span<int> out(out_block.data<int>(), n);
  auto k_fill = test::kernels().kernel("fill_iota");
  auto k_twice = test::kernels().kernel("twice_plus_one");
  a.synchronize();
  b.synchronize();

  SECTION("tracked: the result is right although A is held by a gate") {
    test::gate g;
    g.close(a);
    runtime::launch(a, k_fill, grid(), writes(x), n, 100);
    runtime::launch(b, k_twice, grid(), reads(x), writes(y), n);  // inserts b.wait(event after the fill)
    copy_async(*rt, b, std::as_writable_bytes(out), y);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(b.query());  // B is waiting for A
    g.open();
    b.synchronize();
    for (int i = 0; i < n; ++i) REQUIRE(out[i] == (100 + i) * 2 + 1);
  }
  SECTION("control: with tracking off, B reads before A writes (so the test above can fail)") {
    runtime::launch(a, k_fill, grid(), writes(x), n, 0);  // x = iota(0), complete before the gate
    a.synchronize();
    x.set_tracking(false);
    test::gate g;
    g.close(a);
    runtime::launch(a, k_fill, grid(), writes(x), n, 100);
    runtime::launch(b, k_twice, grid(), reads(x), writes(y), n);
    copy_async(*rt, b, std::as_writable_bytes(out), y);
    b.synchronize();  // B does not wait for the gated stream
    CHECK(out[5] == 5 * 2 + 1);  // read the old contents
    g.open();
    a.synchronize();
  }
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("a buffer freed while another stream reads it is not reused until that stream is done",
          "[runtime][hazard][gpu][concurrent]") {
  auto rt = device_runtime::for_device(0);
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  auto k_fill = test::kernels().kernel("fill_iota");
  auto k_twice = test::kernels().kernel("twice_plus_one");
  tracked_buffer y = tracked_buffer::allocate(*rt, b, n * sizeof(int));
  test::gate g;
  CUdeviceptr freed = 0;
  {
    tracked_buffer x = tracked_buffer::allocate(*rt, a, n * sizeof(int));
    runtime::launch(a, k_fill, grid(), writes(x), n, 7);
    g.close(b);
    runtime::launch(b, k_twice, grid(), reads(x), writes(y), n);  // held by the gate
    freed = x.get();
  }  // x is freed on a, after a waits for b's read
  // A new allocation of the same size on a reuses that memory; poison it.
  tracked_buffer z = tracked_buffer::allocate(*rt, a, n * sizeof(int));
  REQUIRE(z.get() == freed);  // else this test could not detect an early reuse
  memset_async(a, z.span(), 0xFF);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(a.query());  // the free (and so the poison) waits for b's read
  g.open();
  std::vector<int> out(n);
  copy_async(*rt, b, std::as_writable_bytes(std::span(out)), y);
  b.synchronize();
  a.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == (7 + i) * 2 + 1);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("copies into and out of tracked buffers through pinned blocks", "[runtime][hazard][gpu][concurrent]") {
  auto rt = device_runtime::for_device(0);
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  tracked_buffer x = tracked_buffer::allocate(*rt, a, 4096);
  pinned_block in = rt->pinned()->allocate(4096), out = rt->pinned()->allocate(4096);
  auto src = test::random_bytes(4096);
  std::memcpy(in.get(), src.data(), 4096);
  test::gate g;
  g.close(a);
  copy_async(a, x, in);   // write on a (held)
  copy_async(b, out, x);  // read on b: waits for a
  g.open();
  b.synchronize();
  CHECK(std::memcmp(out.get(), src.data(), 4096) == 0);
}

TEST_CASE("runtime errors name the caller's line also when the calls they make fail", "[runtime][error][gpu][api_error]") {
  using test::check_call_site;
  using test::error_of;
  auto rt = device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  tracked_buffer x = tracked_buffer::allocate(*rt, s, 4096);
  const std::span<const std::byte> none;
  const auto k = test::kernels().kernel("fill_iota");
  check_call_site(error_of([&] { device_runtime::for_device(device::count() + 3); }));
  check_call_site(error_of([&] { tracked_buffer::allocate(*rt, s, 0); }));
  check_call_site(error_of([&] { rt->pinned()->allocate(0); }));
  check_call_site(error_of([&] { copy_async(*rt, s, x, none); }));
  check_call_site(error_of([&] { rt->staging().copy_to_device(s, x.span(), none); }));
  check_call_site(error_of([&] { runtime::launch(s, k, grid(), writes(x)); }));
  const cuda_error e = error_of([&] { tracked_buffer::allocate(*rt, s, 0); });
  CHECK_THAT(e.where().file_name(), Catch::EndsWith("tracked_buffer_test.cpp"));
  s.synchronize();
}
