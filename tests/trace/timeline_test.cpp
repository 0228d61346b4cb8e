// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Normalizing a timeline: what every exporter and the overlap summary start from.
#include <cuasync/trace/timeline.hpp>

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;

TEST_CASE("normalize sorts spans and gives every lane with spans one named entry, in lane order", "[trace]") {
  trace::timeline t;
  auto add = [&](trace::lane l, std::int64_t begin, std::int64_t end) {
    trace::span s;
    s.lane = l;
    s.begin_ns = begin;
    s.end_ns = end;
    t.spans.push_back(s);
  };
  add(trace::lane::host_thread(1), 30, 40);
  add(trace::lane::stream(0, 5), 10, 50);
  add(trace::lane::copy(0, trace::lane_kind::copy_h2d), 10, 20);
  t.lanes = {{trace::lane::host_thread(1), "io"}, {trace::lane::host_thread(1), "duplicate"},
             {trace::lane::stream(0, 8), "named, no spans"}};
  t.normalize();
  REQUIRE(t.spans.size() == 3);
  CHECK(t.spans[0].lane == trace::lane::copy(0, trace::lane_kind::copy_h2d));  // same begin: lane order
  CHECK(t.spans[1].lane == trace::lane::stream(0, 5));
  CHECK(t.spans[2].begin_ns == 30);
  REQUIRE(t.lanes.size() == 4);
  CHECK(t.lanes[0].name == "H2D (GPU 0)");
  CHECK(t.lanes[1].name == "stream 5 (GPU 0)");
  CHECK(t.lanes[2].name == "named, no spans");
  CHECK(t.lanes[3].name == "io");
  CHECK(t.lane_name(trace::lane::stream(0, 99)) == "stream 99 (GPU 0)");
  CHECK(t.first_begin_ns() == 10);
  CHECK(t.last_end_ns() == 50);
  CHECK(trace::timeline{}.first_begin_ns() == 0);
}
