// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The pipeline diagnostics on hand-made timelines: a host-bound pipeline, the GPU idle through host round trips, and
// too few slots; each provoked, and each silent on a pipeline that keeps the GPU busy.
#include <cuasync/trace/diagnostics.hpp>

#include "span_builder.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;
using trace::category;
using trace::diagnostic;
using trace::test::find_kind;
using trace::test::names;
using trace::test::span_builder;

namespace {

// One request on `stream` from `at` (us): preprocess on `pre_thread` for `pre` us, H2D 90, kernel 100, D2H 90 (each
// issued by the preprocessing thread, linked by flow ids), the io thread's await from the issue to 10 us after the
// D2H, then a 95 us postprocess on thread 3. Returns when the request's GPU work ends.
std::int64_t request(span_builder& b, std::uint64_t stream, std::int64_t at, std::int64_t pre,
                     std::uint64_t pre_thread = 2) {
  static std::uint64_t flow = 1;
  const std::string label = "request " + std::to_string(at);
  b.host(pre_thread, category::user, "preprocess", at, at + pre).label = label;
  const std::int64_t issued = at + pre + 2;
  b.issue(pre_thread, category::copy, stream, "H2D copy", issued, issued + 3).flow = flow;
  b.copy(trace::lane_kind::copy_h2d, stream, issued + 8, issued + 98).flow = flow++;
  b.issue(pre_thread, category::launch, stream, "infer", issued + 3, issued + 6).flow = flow;
  b.kernel(stream, "infer", issued + 98, issued + 198).flow = flow++;
  b.copy(trace::lane_kind::copy_d2h, stream, issued + 198, issued + 288);
  b.host(1, category::await, "await", issued + 6, issued + 298);
  b.host(3, category::user, "postprocess", issued + 300, issued + 395).label = label;
  return issued + 288;
}

}  // namespace

TEST_CASE("host_bound_pipeline fires on one slot whose preprocess is longer than its GPU work",
          "[trace][diagnostics]") {
  span_builder b;
  for (int r = 0; r < 10; ++r) request(b, 7, r * 1000, 500);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::host_bound_pipeline);
  REQUIRE(f);
  CHECK(f->occurrences == 9);  // the first preprocess runs before the GPU's first work: outside the window
  CHECK(names(*f, "most of it \"preprocess\""));
  CHECK(names(*f, "10 spans on 1 thread, 500.000 µs each on average"));
  CHECK(names(*f, "then \"postprocess\""));
  CHECK(names(*f, "preprocess on thread 2 at 1.000 ms, 500.000 µs long"));
  for (const char* audience : {"C++:", "C:", "Python:"}) CHECK(f->fix.find(audience) != std::string::npos);
  CHECK(f->places.size() == 9);
  // The gaps are the host stages', not round trips.
  CHECK_FALSE(find_kind(fs, diagnostic::gpu_idle_round_trip));

  SECTION("too_few_slots fires beside it, with the number of slots the GPU needs") {
    const trace::finding* g = find_kind(fs, diagnostic::too_few_slots);
    REQUIRE(g);
    CHECK(g->occurrences == 1);
    // A cycle of 1 ms per request; the busiest stage (compute) 100 us per request: 10 slots.
    CHECK(names(*g, "1 stream (slot) ran 10 requests, each stream one every 1.000 ms"));
    CHECK(names(*g, "cycle / bound = 10.0, so about 10 requests in flight"));
    CHECK(g->fix.find("--slots 10") != std::string::npos);
    CHECK_FALSE(g->places.empty());
  }
}

TEST_CASE("the pipeline diagnostics are silent when the slots keep the GPU busy", "[trace][diagnostics]") {
  // 12 slots, requests every 100 us (the kernel's time): the host stages run all the time, the GPU is never idle.
  span_builder b;
  for (int r = 0; r < 60; ++r) request(b, 10 + r % 12, r * 100, 500, 2 + r % 8);
  const auto fs = b.diagnose();
  CHECK_FALSE(find_kind(fs, diagnostic::host_bound_pipeline));
  CHECK_FALSE(find_kind(fs, diagnostic::too_few_slots));
  CHECK_FALSE(find_kind(fs, diagnostic::gpu_idle_round_trip));
}

TEST_CASE("too_few_slots is silent when one host thread runs every stage back to back", "[trace][diagnostics]") {
  // The driving thread preprocesses each request for 580 us, one after another, over 3 slots: it is the limit, and
  // more slots would queue behind it (host_bound_pipeline says so).
  span_builder b;
  for (int r = 0; r < 12; ++r) request(b, 20 + r % 3, r * 600, 580, 2);
  const auto fs = b.diagnose();
  CHECK(find_kind(fs, diagnostic::host_bound_pipeline));
  CHECK_FALSE(find_kind(fs, diagnostic::too_few_slots));
}

namespace {
// A chain of `links` kernels on stream 1, each issued by thread 1 after it awaited the one before: the await sees the
// completion `seen` us after it, the host issues `host` us later, the GPU starts the kernel `launch` us after the
// issue.
span_builder round_trips(int links, std::int64_t seen, std::int64_t host, std::int64_t launch = 10,
                         bool stream_ordered = false) {
  span_builder b;
  std::int64_t at = 0;
  for (int i = 0; i < links; ++i) {
    const std::uint64_t flow = static_cast<std::uint64_t>(i + 1);
    const std::int64_t issued = stream_ordered ? i * 5 : at;
    b.issue(1, category::launch, 1, "step", issued, issued + 3).flow = flow;
    const std::int64_t begin = std::max(at, issued + launch);
    b.kernel(1, "step", begin, begin + 100).flow = flow;
    if (!stream_ordered) b.host(1, category::await, "await step", issued + 4, begin + 100 + seen);
    at = begin + 100 + seen + host;
  }
  return b;
}
}  // namespace

TEST_CASE("gpu_idle_round_trip fires on kernels each issued after the host awaited the one before",
          "[trace][diagnostics]") {
  const span_builder b = round_trips(10, 15, 25);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::gpu_idle_round_trip);
  REQUIRE(f);
  CHECK(f->occurrences == 9);  // between 10 kernels
  CHECK(names(*f, "on average 15.000 µs until the host saw the completion, 25.000 µs until it issued the next "
                  "operation, 10.000 µs from that issue to the GPU"));
  CHECK(names(*f, "the GPU idle 50.000 µs after step on stream 1 (GPU 0)"));
  CHECK(f->fix.find("stream_ref::wait(event)") != std::string::npos);
  CHECK(f->fix.find("event_wait") != std::string::npos);
  CHECK(f->fix.find("stream.wait_event(event)") != std::string::npos);
  CHECK(f->places.size() == 18);
  // No host stage ran in the gaps: neither host-bound nor a matter of slots.
  CHECK_FALSE(find_kind(fs, diagnostic::host_bound_pipeline));
  CHECK_FALSE(find_kind(fs, diagnostic::too_few_slots));
}

TEST_CASE("gpu_idle_round_trip is silent on stream-ordered work, short gaps and gaps without a wait",
          "[trace][diagnostics]") {
  // Enqueued up front: the host waited for nothing, the GPU ran the kernels back to back.
  CHECK_FALSE(find_kind(round_trips(10, 15, 25, 10, true).diagnose(), diagnostic::gpu_idle_round_trip));
  // Gaps of 4 us: launch latency.
  CHECK_FALSE(find_kind(round_trips(10, 1, 1, 2).diagnose(), diagnostic::gpu_idle_round_trip));
  // Two round trips only.
  CHECK_FALSE(find_kind(round_trips(3, 15, 25).diagnose(), diagnostic::gpu_idle_round_trip));
  // The host issued late but had not waited for the GPU (no await span): not a round trip.
  span_builder b = round_trips(10, 15, 25);
  std::erase_if(b.t.spans, [](const trace::span& s) { return s.category == category::await; });
  CHECK_FALSE(find_kind(b.diagnose(), diagnostic::gpu_idle_round_trip));
}

TEST_CASE("gpu_idle_round_trip allows the GPU clock's mapping error: a wait seen ending just before its kernel's end",
          "[trace][diagnostics]") {
  // A GPU span's end is mapped onto the host clock within a few us: a synchronize may be seen returning 1 us before
  // the end of the kernel it waited for (seen on the H200). Still a round trip; "until the host saw" is then 0.
  const trace::finding* f = nullptr;
  const auto fs = round_trips(10, -1, 25).diagnose();
  f = find_kind(fs, diagnostic::gpu_idle_round_trip);
  REQUIRE(f);
  CHECK(f->occurrences == 9);
  CHECK(names(*f, "on average 0 ns until the host saw the completion, 24.000 µs until it issued the next"));
  // A wait that ended well before the kernel did (10 us) was not waiting for it.
  CHECK_FALSE(find_kind(round_trips(10, -10, 25).diagnose(), diagnostic::gpu_idle_round_trip));
}
