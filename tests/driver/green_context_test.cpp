// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/green_context.hpp>

#include <catch2/catch.hpp>

#include <cuasync/driver.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <algorithm>
#include <vector>

using namespace cuasync;
using Catch::Matchers::Contains;

TEST_CASE("green contexts on a driver without them are refused, saying so", "[.simulated][driver][green_context]") {
  CUASYNC_SIMULATED_ONLY();
  CHECK_FALSE(green_context::supported());
  CHECK_THROWS_AS(green_context::create(device::get(0), 8), driver_too_old_error);
  CHECK_THROWS_WITH(green_context::create(device::get(0), 8), Contains("has no green contexts (cuGreenCtxCreate"));
  CHECK_THROWS_AS(green_context::split(device::get(0), 8), driver_too_old_error);
  green_context none;
  CHECK_FALSE(none);
  CHECK_FALSE(none.context());
}

TEST_CASE("a green context runs kernels on the SMs it was given", "[driver][green_context][gpu]") {
  REQUIRE(green_context::supported());  // every driver cuasync loads (CUDA 12.4+) has them
  const device dev = device::get(0);
  const unsigned total = static_cast<unsigned>(dev.properties().multiprocessor_count);
  const green_context g = green_context::create(dev, total / 4);
  CHECK(g.sm_count() >= total / 4);
  CHECK(g.sm_count() < total);
  REQUIRE(g.context());
  CHECK(g.context().device_ordinal() == 0);
  CHECK_FALSE(g.context() == test::ctx());

  // Its own streams, modules and memory, as on any context.
  stream s = stream::create(g.context());
  module m = module::load(g.context(), test::kernels_fatbin(), "test_kernels.fatbin");
  constexpr int n = 1 << 16;
  device_buffer d = device_buffer::allocate(g.context(), n * sizeof(int));
  memset_async(s, d.span(), 0);
  launch(s, m.kernel("add_value"), {.grid = n / 256, .block = 256}, d.data<int>(), n, 7);
  std::vector<int> host(n);
  copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
  s.synchronize();
  CHECK(std::count(host.begin(), host.end(), 7) == n);

  SECTION("disjoint halves") {
    auto [a, b] = green_context::split(dev, total / 4);
    CHECK(a.sm_count() >= total / 4);
    CHECK(b.sm_count() > 0);
    CHECK(a.sm_count() + b.sm_count() <= total);
  }
  SECTION("requests the device cannot meet are refused before a green context is made") {
    CHECK_THROWS_WITH(green_context::create(dev, 0), Contains("0 SMs asked"));
    CHECK_THROWS_WITH(green_context::create(dev, total + 1), Contains("which has " + std::to_string(total)));
    CHECK_THROWS_WITH(green_context::split(dev, total),
                      Contains("leave none") || Contains("cuDevSmResourceSplitByCount"));
  }
}
