// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Spans and lanes: the names the exporters write and read, lane order, default lane names.
#include <cuasync/trace/span.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

namespace trace = cuasync::trace;

TEST_CASE("category and lane kind names read back", "[trace]") {
  for (int i = 0; i < trace::category_count; ++i) {
    const auto c = static_cast<trace::category>(i);
    CHECK(trace::category_from_string(trace::to_string(c)) == c);
  }
  CHECK(trace::to_string(trace::category::staged_copy_chunk) == "staged_copy_chunk");
  CHECK_FALSE(trace::category_from_string("kernel").has_value());
  for (auto k : {trace::lane_kind::stream, trace::lane_kind::copy_h2d, trace::lane_kind::copy_d2h,
                 trace::lane_kind::copy_d2d, trace::lane_kind::copy_p2p, trace::lane_kind::host_thread})
    CHECK(trace::lane_kind_from_string(trace::to_string(k)) == k);
  CHECK_FALSE(trace::lane_kind_from_string("gpu").has_value());
}

TEST_CASE("lanes sort by device, copy directions before streams, host threads last", "[trace]") {
  std::vector<trace::lane> lanes = {
      trace::lane::host_thread(2),
      trace::lane::stream(1, 3),
      trace::lane::stream(0, 9),
      trace::lane::copy(0, trace::lane_kind::copy_d2h),
      trace::lane::host_thread(1),
      trace::lane::stream(0, 4),
      trace::lane::copy(0, trace::lane_kind::copy_h2d),
      trace::lane::copy(1, trace::lane_kind::copy_p2p),
  };
  std::sort(lanes.begin(), lanes.end());
  const std::vector<trace::lane> expected = {
      trace::lane::copy(0, trace::lane_kind::copy_h2d), trace::lane::copy(0, trace::lane_kind::copy_d2h),
      trace::lane::stream(0, 4), trace::lane::stream(0, 9), trace::lane::copy(1, trace::lane_kind::copy_p2p),
      trace::lane::stream(1, 3), trace::lane::host_thread(1), trace::lane::host_thread(2)};
  CHECK(lanes == expected);
  CHECK(trace::lane::copy(0, trace::lane_kind::copy_d2d).is_copy());
  CHECK_FALSE(trace::lane::stream(0, 1).is_copy());
}

TEST_CASE("lanes have default names", "[trace]") {
  CHECK(trace::default_lane_name(trace::lane::stream(0, 7)) == "stream 7 (GPU 0)");
  CHECK(trace::default_lane_name(trace::lane::copy(1, trace::lane_kind::copy_h2d)) == "H2D (GPU 1)");
  CHECK(trace::default_lane_name(trace::lane::copy(0, trace::lane_kind::copy_p2p)) == "P2P (GPU 0)");
  CHECK(trace::default_lane_name(trace::lane::host_thread(3)) == "thread 3");
}
