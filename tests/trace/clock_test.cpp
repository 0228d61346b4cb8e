// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The map from GPU event times (elapsed after a reference event) onto the host clock.
#include <cuasync/trace/clock.hpp>

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;

TEST_CASE("cuEventElapsedTime's milliseconds become nanoseconds, rounded", "[trace]") {
  CHECK(trace::elapsed_ms_to_ns(0.0f) == 0);
  CHECK(trace::elapsed_ms_to_ns(1.5f) == 1'500'000);
  CHECK(trace::elapsed_ms_to_ns(0.0005f) == 500);
  CHECK(trace::elapsed_ms_to_ns(-2.0f) == -2'000'000);
}

TEST_CASE("the GPU clock map keeps the tightest sample and maps elapsed times onto the host clock", "[trace]") {
  trace::gpu_clock_map map;
  CHECK_FALSE(map.calibrated());
  // The reference ran at host time 1,000,000; the host saw each sample event some time after it completed.
  map.add_sample(1'000'000 + 5'000 + 900, 5'000);    // seen 900 ns late
  map.add_sample(1'000'000 + 20'000 + 150, 20'000);  // seen 150 ns late: the best estimate
  map.add_sample(1'000'000 + 40'000 + 3'000, 40'000);
  REQUIRE(map.calibrated());
  CHECK(map.reference_host_ns() == 1'000'150);
  CHECK(map.to_host_ns(0) == 1'000'150);
  CHECK(map.to_host_ns(12'345) == 1'012'495);
  CHECK(map.to_host_ns_from_ms(0.25f) == 1'250'150);

  const trace::gpu_clock_map one(7'000, 2'000);  // from one sample
  CHECK(one.reference_host_ns() == 5'000);
  CHECK(one.to_host_ns(-1'000) == 4'000);
}
