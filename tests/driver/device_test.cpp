// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/device.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

using namespace cuasync;

TEST_CASE("devices are enumerated with their attributes", "[driver][device][gpu]") {
  REQUIRE(device::count() >= 1);
  const device_properties& p = device::get(0).properties();
  CHECK(!p.name.empty());
  CHECK(p.compute_capability_major >= 7);
  CHECK_THAT(p.uuid, Catch::StartsWith("GPU-"));
  CHECK(p.uuid.size() == 40);
  CHECK(p.pci_bus_id.find(':') != std::string::npos);
  CHECK(p.total_memory > (1ull << 30));
  CHECK(p.multiprocessor_count > 0);
  CHECK(p.async_engine_count >= 1);
  CHECK(p.max_threads_per_block >= 1024);
  CHECK(p.max_shared_memory_per_block_optin >= p.max_shared_memory_per_block);
  CHECK(p.stream_priority_greatest <= p.stream_priority_least);
  CHECK(p.warp_size == 32);
  CHECK(device::get(0).compute_capability() == p.compute_capability_major * 10 + p.compute_capability_minor);
  auto [free_bytes, total] = device::get(0).memory_info();
  CHECK(free_bytes <= total);
  CHECK(total == p.total_memory);
}

TEST_CASE("an invalid device ordinal is a clear error", "[driver][device][gpu]") {
  const int n = device::count();
  try {
    device::get(n + 3);
    FAIL("no throw");
  } catch (const cuda_error& e) {
    CHECK(e.result() == CUDA_ERROR_INVALID_DEVICE);
    CHECK_THAT(e.what(), Catch::Contains("device ordinal " + std::to_string(n + 3) + " is out of range"));
  }
  CHECK_THROWS_AS(device::get(-1), cuda_error);
}

TEST_CASE("the primary context is retained, adopted and made current only when needed", "[driver][context][gpu]") {
  primary_context a = primary_context::retain(0);
  primary_context b = primary_context::retain(device::get(0));
  CHECK(a.get() == b.get());  // one primary context per device, refcounted
  CHECK(a.device_ordinal() == 0);
  context_ref adopted = context_ref::adopt(a.get());
  CHECK(adopted == a);
  CHECK(adopted.device_ordinal() == 0);
  {
    scoped_context guard(a);
    CHECK(context_ref::current() == a);
  }
  primary_context moved = std::move(a);
  CHECK_FALSE(a);
  CHECK(moved.get() == b.get());
  CHECK_THROWS_AS(context_ref::adopt(nullptr), cuda_error);
}
