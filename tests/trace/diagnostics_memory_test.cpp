// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The memory-traffic diagnostics on hand-made timelines: each fires on the pattern and stays silent on its clean
// counterpart.
#include <cuasync/trace/diagnostics.hpp>

#include "span_builder.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;
using trace::diagnostic;
using trace::lane_kind;
using trace::test::find_kind;
using trace::test::names;
using trace::test::span_builder;

TEST_CASE("pageable_copy fires on copies of pageable memory, once per copy", "[trace][diagnostics]") {
  span_builder b;
  b.issue(1, trace::category::copy, 7, "cuMemcpyHtoDAsync", 0, 40, trace::flag::pageable_host);
  b.copy(lane_kind::copy_h2d, 7, 10, 400, 8 << 20, trace::flag::pageable_host);
  b.copy(lane_kind::copy_d2h, 7, 500, 700, 4 << 20);  // pinned
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::pageable_copy);
  REQUIRE(f);
  CHECK(f->occurrences == 1);  // the GPU span; its issue span is the same copy
  CHECK(names(*f, "cuMemcpyHtoDAsync on H2D (GPU 0) (stream 7)"));
  CHECK(f->summary.find("8.0 MiB") != std::string::npos);
  CHECK(f->fix.find("rt->pinned()") != std::string::npos);

  SECTION("only the host's issue spans: counted from those") {
    b.t.spans.erase(b.t.spans.begin() + 1);
    const auto host_only = b.diagnose();
    REQUIRE(find_kind(host_only, diagnostic::pageable_copy));
    CHECK(find_kind(host_only, diagnostic::pageable_copy)->occurrences == 1);
  }
}

TEST_CASE("pageable_copy is silent on pinned copies", "[trace][diagnostics]") {
  span_builder b;
  b.issue(1, trace::category::copy, 7, "cuMemcpyHtoDAsync", 0, 5);
  b.copy(lane_kind::copy_h2d, 7, 10, 400);
  CHECK_FALSE(find_kind(b.diagnose(), diagnostic::pageable_copy));
}

namespace {
// Four rounds of upload then download of 1 MiB each, on `h2d_stream` and `d2h_stream`; `overlapped`: each download
// runs beside the next round's upload.
span_builder copy_rounds(int copy_engines, bool overlapped, std::uint64_t h2d_stream = 7,
                         std::uint64_t d2h_stream = 7) {
  span_builder b;
  b.t.devices.push_back({0, "test GPU", 132, copy_engines});
  for (int r = 0; r < 4; ++r) {
    const std::int64_t at = r * 1'000;
    b.copy(lane_kind::copy_h2d, h2d_stream, at, at + 300);
    if (overlapped)
      b.copy(lane_kind::copy_d2h, d2h_stream, at + 900, at + 1'200);
    else
      b.copy(lane_kind::copy_d2h, d2h_stream, at + 400, at + 700);
  }
  b.t.normalize();
  return b;
}
}  // namespace

TEST_CASE("copies_not_overlapped fires when alternating copies never ran at once on a GPU with 2 engines",
          "[trace][diagnostics]") {
  const auto fs = copy_rounds(2, false).diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::copies_not_overlapped);
  REQUIRE(f);
  CHECK(f->occurrences == 8);
  CHECK(names(*f, "GPU 0 has 2 copy engines"));
  CHECK(names(*f, "cuMemcpyDtoHAsync on D2H (GPU 0)"));
  CHECK(f->explanation.find("issued on stream 7") != std::string::npos);  // one stream: the likely cause
  CHECK(f->fix.find("slot_pipeline") != std::string::npos);
}

TEST_CASE("copies_not_overlapped is silent when the directions overlapped, with one engine, or unknown engines",
          "[trace][diagnostics]") {
  CHECK_FALSE(find_kind(copy_rounds(2, true, 7, 8).diagnose(), diagnostic::copies_not_overlapped));
  CHECK_FALSE(find_kind(copy_rounds(1, false).diagnose(), diagnostic::copies_not_overlapped));
  span_builder undescribed = copy_rounds(2, false);
  undescribed.t.devices.clear();
  CHECK_FALSE(find_kind(undescribed.diagnose(), diagnostic::copies_not_overlapped));

  SECTION("all uploads, then all downloads: nothing alternated, nothing to overlap without restructuring") {
    span_builder b;
    b.t.devices.push_back({0, "test GPU", 132, 2});
    for (int r = 0; r < 4; ++r) b.copy(lane_kind::copy_h2d, 7, r * 400, r * 400 + 300);
    for (int r = 0; r < 4; ++r) b.copy(lane_kind::copy_d2h, 7, 2'000 + r * 400, 2'000 + r * 400 + 300);
    CHECK_FALSE(find_kind(b.diagnose(), diagnostic::copies_not_overlapped));
  }
}

TEST_CASE("buffer_reused_in_flight fires on two streams using one range at once, one writing",
          "[trace][diagnostics]") {
  span_builder b;
  b.copy(lane_kind::copy_h2d, 1, 0, 100, 4096).dst = 0x10000;
  trace::span& m = b.add(trace::lane::stream(0, 2), trace::category::memset, "cuMemsetD8Async", 50, 150);
  m.dst = 0x10800;
  m.bytes = 256;
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::buffer_reused_in_flight);
  REQUIRE(f);
  CHECK(f->occurrences == 1);
  REQUIRE(f->examples.size() == 1);
  CHECK(names(*f, "cuMemcpyHtoDAsync on H2D (GPU 0) (stream 1)"));
  CHECK(names(*f, "cuMemsetD8Async on stream 2 (GPU 0)"));
  CHECK(names(*f, "both write near 0x10000"));

  SECTION("a read of what the other writes fires too") {
    trace::span& d2h = b.copy(lane_kind::copy_d2h, 3, 60, 90, 128);
    d2h.src = 0x10810;  // inside both the upload's and the memset's range
    d2h.dst = 0x900000;
    const auto again = b.diagnose();
    const trace::finding* g = find_kind(again, diagnostic::buffer_reused_in_flight);
    REQUIRE(g);
    CHECK(g->occurrences == 3);  // the copy and the memset, the upload and the download, the download and the memset
    CHECK(names(*g, "one writes what the other reads"));
  }
}

TEST_CASE("buffer_reused_in_flight is silent on ordered, same-stream, disjoint and read-only uses",
          "[trace][diagnostics]") {
  auto run = [](std::uint64_t second_stream, std::int64_t second_begin, std::uint64_t second_dst,
                bool second_reads) {
    span_builder b;
    trace::span& first = b.copy(lane_kind::copy_d2h, 1, 0, 100, 4096);
    first.src = 0x10000;
    first.dst = 0x700000;
    trace::span& second = b.copy(lane_kind::copy_h2d, second_stream, second_begin, second_begin + 100, 4096);
    (second_reads ? second.src : second.dst) = second_dst;
    return find_kind(b.diagnose(), diagnostic::buffer_reused_in_flight) != nullptr;
  };
  CHECK(run(2, 50, 0x10000, false));        // the provoking case: written while being read
  CHECK_FALSE(run(2, 100, 0x10000, false)); // ordered: began when the first ended (an event wait)
  CHECK_FALSE(run(1, 50, 0x10000, false));  // the same stream runs them in order
  CHECK_FALSE(run(2, 50, 0x20000, false));  // other memory
  CHECK_FALSE(run(2, 50, 0x10000, true));   // both only read it
}
