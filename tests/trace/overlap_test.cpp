// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The overlap summary on hand-made spans whose answers are known.
#include <cuasync/trace/overlap.hpp>

#include <cuasync/trace/json.hpp>

#include "synthetic_pipeline.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;

namespace {
struct builder {
  trace::timeline t;
  builder& add(trace::lane l, trace::category c, std::int64_t begin, std::int64_t end, std::uint64_t bytes = 0) {
    trace::span s;
    s.lane = l;
    s.category = c;
    s.begin_ns = begin;
    s.end_ns = end;
    s.bytes = bytes;
    t.spans.push_back(s);
    return *this;
  }
  builder& h2d(std::int64_t b, std::int64_t e, int device = 0) {
    return add(trace::lane::copy(device, trace::lane_kind::copy_h2d), trace::category::copy, b, e, 100);
  }
  builder& d2h(std::int64_t b, std::int64_t e) {
    return add(trace::lane::copy(0, trace::lane_kind::copy_d2h), trace::category::copy, b, e, 10);
  }
  builder& kernel(std::int64_t b, std::int64_t e, std::uint64_t stream = 1, int device = 0) {
    return add(trace::lane::stream(device, stream), trace::category::launch, b, e);
  }
};
}  // namespace

TEST_CASE("a staggered H2D, kernel, D2H: busy, overlapped and exclusive times, the critical stage", "[trace][overlap]") {
  builder b;
  b.h2d(0, 10).kernel(5, 20).d2h(15, 25);
  const trace::overlap_summary s = trace::summarize(b.t);
  CHECK(s.window_begin_ns == 0);
  CHECK(s.window_ns() == 25);
  CHECK(s.h2d.busy_ns == 10);
  CHECK(s.h2d.overlapped_ns == 5);
  CHECK(s.h2d.exclusive_ns() == 5);
  CHECK(s.h2d.bytes == 100);
  CHECK(s.compute.busy_ns == 15);
  CHECK(s.compute.overlapped_ns == 10);
  CHECK(s.d2h.busy_ns == 10);
  CHECK(s.d2h.overlapped_ns == 5);
  CHECK(s.h2d_with_compute_ns == 5);
  CHECK(s.d2h_with_compute_ns == 5);
  CHECK(s.h2d_with_d2h_ns == 0);
  CHECK(s.all_three_ns == 0);
  CHECK(s.any_busy_ns == 25);
  CHECK(s.idle_ns() == 0);
  CHECK(s.critical == trace::stage::compute);
  CHECK(s.overlap_factor() == Approx(35.0 / 25.0));
}

TEST_CASE("kernels overlapping on two streams count once; gaps are idle time", "[trace][overlap]") {
  builder b;
  b.kernel(0, 10, 1).kernel(5, 15, 2).h2d(20, 30);
  const trace::overlap_summary s = trace::summarize(b.t);
  CHECK(s.compute.spans == 2);
  CHECK(s.compute.busy_ns == 15);
  CHECK(s.compute.overlapped_ns == 0);
  CHECK(s.window_ns() == 30);
  CHECK(s.any_busy_ns == 25);
  CHECK(s.idle_ns() == 5);
  CHECK(s.critical == trace::stage::compute);
  CHECK(s.overlap_factor() == Approx(1.0));
}

TEST_CASE("all three stages at once; equal stages make H2D critical", "[trace][overlap]") {
  builder b;
  b.h2d(0, 10).kernel(0, 10).d2h(0, 10);
  const trace::overlap_summary s = trace::summarize(b.t);
  CHECK(s.all_three_ns == 10);
  CHECK(s.h2d_with_d2h_ns == 10);
  CHECK(s.h2d.overlapped_ns == 10);
  CHECK(s.compute.exclusive_ns() == 0);
  CHECK(s.critical == trace::stage::h2d);
  CHECK(s.overlap_factor() == Approx(3.0));
}

TEST_CASE("spans outside the three stages are left out, and a device can be chosen", "[trace][overlap]") {
  builder b;
  b.add(trace::lane::host_thread(1), trace::category::launch, 0, 100);  // a launch's host issue time
  b.add(trace::lane::stream(0, 1), trace::category::memset, 0, 100);
  b.add(trace::lane::copy(0, trace::lane_kind::copy_d2d), trace::category::copy, 0, 100);
  trace::overlap_summary s = trace::summarize(b.t);
  CHECK(s.critical == trace::stage::none);
  CHECK(s.window_ns() == 0);
  CHECK(s.overlap_factor() == 0);
  CHECK(trace::to_text(s).find("no copies or kernels") != std::string::npos);

  b.kernel(1000, 2000, 1, 1).h2d(0, 10, 0);
  s = trace::summarize(b.t, 1);
  CHECK(s.compute.busy_ns == 1000);
  CHECK(s.h2d.spans == 0);
  CHECK(s.window_begin_ns == 1000);
  s = trace::summarize(b.t);
  CHECK(s.window_ns() == 2000);
}

TEST_CASE("the synthetic pipeline's summary", "[trace][overlap]") {
  const trace::overlap_summary s = trace::summarize(trace::test::pipeline_timeline());
  constexpr std::int64_t us = 1000;
  CHECK(s.window_ns() == 7'600 * us);     // first H2D at 1.0 ms to last D2H end at 8.6 ms
  CHECK(s.h2d.busy_ns == 6 * 600 * us);   // six disjoint copies
  CHECK(s.compute.busy_ns == 6'500 * us); // kernels back to back across streams: 1.6 to 8.1 ms
  CHECK(s.d2h.busy_ns == 6 * 500 * us);
  CHECK(s.h2d.bytes == 6u * (8u << 20));
  CHECK(s.critical == trace::stage::compute);
  // Every H2D but the first runs beside a kernel; every D2H but the last does.
  CHECK(s.h2d_with_compute_ns == 5 * 600 * us);
  CHECK(s.d2h_with_compute_ns == 5 * 500 * us);
}

TEST_CASE("the summary as text and as JSON", "[trace][overlap]") {
  builder b;
  b.h2d(0, 10'000'000).kernel(5'000'000, 20'000'000).d2h(15'000'000, 25'000'000);
  const trace::overlap_summary s = trace::summarize(b.t);
  const std::string text = trace::to_text(s);
  CHECK(text.find("window 25.000 ms") != std::string::npos);
  CHECK(text.find("critical stage: compute (busy 15.000 ms, 60.0% of the window)") != std::string::npos);
  CHECK(text.find("overlap factor: 1.40") != std::string::npos);
  const auto json = trace::json::parse(trace::to_json(s));
  CHECK(json.find("critical")->as_string() == "compute");
  CHECK(json.find("window_ns")->as_number() == 25'000'000);
  CHECK(json.find("h2d")->find("busy_ns")->as_number() == 10'000'000);
  CHECK(json.find("compute")->find("overlapped_ns")->as_number() == 10'000'000);
  CHECK(json.find("overlap_factor")->as_number() == Approx(1.4));
}

TEST_CASE("durations are formatted with a unit that suits them", "[trace][overlap]") {
  CHECK(trace::format_duration(870) == "870 ns");
  CHECK(trace::format_duration(1'500) == "1.500 µs");
  CHECK(trace::format_duration(12'345'678) == "12.346 ms");
  CHECK(trace::format_duration(1'250'000'000) == "1.250 s");
  CHECK(trace::format_percent(1, 3) == "33.3%");
  CHECK(trace::format_percent(1, 0) == "0.0%");
}
