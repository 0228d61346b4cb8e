// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Several devices: runtimes found by UUID, peer access on demand, peer copies, and tracked buffers whose users are
// on different devices. [multi_gpu] cases need two devices and skip (with a warning) on one.
#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/launch.hpp>
#include <cuasync/runtime/peer.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>
#include <thread>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
constexpr int n = 1 << 20;  // 4 MiB of ints
launch_config grid() { return {.grid = n / 256, .block = 256}; }

struct two_devices {
  std::shared_ptr<device_runtime> rt0 = device_runtime::for_device(0), rt1 = device_runtime::for_device(1);
  stream s0 = stream::create(rt0->context()), s1 = stream::create(rt1->context());
};
}  // namespace

TEST_CASE("a device and its runtime are found by UUID", "[runtime][multi_gpu][gpu]") {
  for (device d : device::all()) {
    const std::string uuid = d.properties().uuid;
    CHECK(device::by_uuid(uuid) == d);
    CHECK(device::by_uuid(uuid.substr(4)) == d);  // without "GPU-"
    CHECK(device_runtime::for_uuid(uuid) == device_runtime::for_device(d.ordinal()));
  }
  try {
    device::by_uuid("GPU-00000000-0000-0000-0000-000000000000");
    FAIL("a made-up UUID was found");
  } catch (const cuda_error& e) {
    CHECK(e.result() == CUDA_ERROR_INVALID_DEVICE);
    CHECK_THAT(std::string(e.what()), Catch::Contains(device::get(0).properties().uuid));  // lists what is there
  }
}

TEST_CASE("peer access is enabled once per pair of contexts", "[runtime][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  two_devices d;
  const bool possible = device::get(0).can_access_peer(device::get(1));
  CHECK(enable_peer_access(d.rt0->context(), d.rt1->context()) == possible);
  CHECK(enable_peer_access(d.rt0->context(), d.rt1->context()) == possible);  // remembered
  CHECK(enable_peer_access(d.rt1->context(), d.rt0->context()) == device::get(1).can_access_peer(device::get(0)));
  CHECK_FALSE(enable_peer_access(d.rt0->context(), d.rt0->context()));
}

TEST_CASE("peer copies are byte-exact at odd sizes, both ways", "[runtime][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  two_devices d;
  for (std::size_t size : {std::size_t{1}, std::size_t{4097}, (std::size_t{4} << 20) + 3}) {
    const auto data = test::random_bytes(size, static_cast<unsigned>(size));
    tracked_buffer a = tracked_buffer::allocate(*d.rt0, d.s0, size), b = tracked_buffer::allocate(*d.rt1, d.s1, size);
    tracked_buffer back = tracked_buffer::allocate(*d.rt0, d.s0, size);
    copy_async(*d.rt0, d.s0, a, std::span<const std::byte>(data));
    copy_peer_async(d.s1, b, a);     // on the destination's device
    copy_peer_async(d.s1, back, b);  // on the source's device (b is on device 1, back on device 0)
    std::vector<std::byte> out(size);
    copy_async(*d.rt0, d.s0, std::span<std::byte>(out), back);
    d.s0.synchronize();
    CHECK(std::memcmp(out.data(), data.data(), size) == 0);
  }
  CHECK_FALSE(d.rt0->context().take_deferred_error());
  CHECK_FALSE(d.rt1->context().take_deferred_error());
}

// [concurrent]: a gate kernel spins on device 0 while this thread enqueues more.
TEST_CASE("a peer copy on device 1 waits for the writer on device 0", "[runtime][hazard][multi_gpu][gpu][concurrent]") {
  if (!test::devices_at_least(2)) return;
  two_devices d;
  tracked_buffer a = tracked_buffer::allocate(*d.rt0, d.s0, n * sizeof(int));
  tracked_buffer b = tracked_buffer::allocate(*d.rt1, d.s1, n * sizeof(int));
  pinned_block out_block = d.rt1->pinned()->allocate(n * sizeof(int));
  std::span<int> out(out_block.data<int>(), n);
  auto fill = test::kernels().kernel("fill_iota");
  runtime::launch(d.s0, fill, grid(), writes(a), n, 0);  // a = iota(0) before the gate
  d.s0.synchronize();
  d.s1.synchronize();

  SECTION("tracked: device 1's stream waits on device 0's event") {
    test::gate g;
    g.close(d.s0);
    runtime::launch(d.s0, fill, grid(), writes(a), n, 100);
    copy_peer_async(d.s1, b, a);  // inserts s1.wait(event recorded on s0, device 0)
    copy_async(d.s1, out_block, b);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(d.s1.query());  // held by the gate on the other device
    g.open();
    d.s1.synchronize();
    for (int i = 0; i < n; ++i) REQUIRE(out[i] == 100 + i);
  }
  SECTION("control: without tracking the copy reads before the write (so the test above can fail)") {
    a.set_tracking(false);
    test::gate g;
    g.close(d.s0);
    runtime::launch(d.s0, fill, grid(), writes(a), n, 100);
    copy_peer_async(d.s1, b, a);
    copy_async(d.s1, out_block, b);
    d.s1.synchronize();  // not held: device 1 does not wait
    CHECK(out[5] == 5);  // the old contents
    g.open();
    d.s0.synchronize();
  }
}

TEST_CASE("a buffer read on another device is freed only after that read", "[runtime][hazard][multi_gpu][gpu][concurrent]") {
  if (!test::devices_at_least(2)) return;
  two_devices d;
  auto fill = test::kernels().kernel("fill_iota");
  tracked_buffer b = tracked_buffer::allocate(*d.rt1, d.s1, n * sizeof(int));
  test::gate g;
  {
    tracked_buffer a = tracked_buffer::allocate(*d.rt0, d.s0, n * sizeof(int));
    runtime::launch(d.s0, fill, grid(), writes(a), n, 7);
    g.close(d.s1);
    copy_peer_async(d.s1, b, a);  // held by the gate on device 1
  }  // a is freed on s0 after s0 waits for s1's read (an event from device 1's pool)
  // Whatever reuses the memory on device 0 runs after the read.
  tracked_buffer c = tracked_buffer::allocate(*d.rt0, d.s0, n * sizeof(int));
  runtime::launch(d.s0, fill, grid(), writes(c), n, -1000000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(d.s0.query());  // device 0 waits for device 1's gated read
  g.open();
  std::vector<int> out(n);
  copy_async(*d.rt1, d.s1, std::as_writable_bytes(std::span<int>(out)), b);
  d.s1.synchronize();
  d.s0.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == 7 + i);
  CHECK_FALSE(d.rt0->context().take_deferred_error());
}
