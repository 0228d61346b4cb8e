// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The stream diagnostics on hand-made timelines: the legacy default stream beside others, and a kernel that filled
// every SM while another stream's work waited.
#include <cuasync/trace/diagnostics.hpp>

#include "span_builder.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;
using trace::diagnostic;
using trace::test::find_kind;
using trace::test::names;
using trace::test::span_builder;

TEST_CASE("default_stream_serialization fires on legacy-stream work beside other streams", "[trace][diagnostics]") {
  span_builder b;
  b.issue(1, trace::category::launch, 3, "legacy_kernel", 0, 5, trace::flag::legacy_stream);
  b.kernel(3, "legacy_kernel", 10, 100, trace::flag::legacy_stream);
  b.issue(1, trace::category::launch, 9, "blocking_kernel", 6, 9, trace::flag::blocking_stream);
  b.kernel(9, "blocking_kernel", 100, 200, trace::flag::blocking_stream);
  b.kernel(12, "other_kernel", 20, 80);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::default_stream_serialization);
  REQUIRE(f);
  CHECK(f->occurrences == 1);  // the legacy stream's GPU span (its issue span is the same launch)
  CHECK(names(*f, "legacy_kernel on stream 3 (GPU 0)"));
  CHECK(names(*f, "beside 2 on 2 other streams (1 of them on blocking streams"));
  CHECK(f->fix.find("rt->streams().next()") != std::string::npos);

  SECTION("beside non-blocking streams only, it still fires, and says they escaped it") {
    span_builder nb;
    nb.kernel(3, "legacy_kernel", 10, 100, trace::flag::legacy_stream);
    nb.kernel(12, "other_kernel", 20, 80);
    const auto again = nb.diagnose();
    const trace::finding* g = find_kind(again, diagnostic::default_stream_serialization);
    REQUIRE(g);
    CHECK(g->explanation.find("non-blocking, so they escaped") != std::string::npos);
  }
}

TEST_CASE("default_stream_serialization is silent on the legacy stream alone and on non-blocking streams",
          "[trace][diagnostics]") {
  span_builder alone;
  alone.kernel(3, "a", 0, 10, trace::flag::legacy_stream);
  alone.kernel(3, "b", 10, 20, trace::flag::legacy_stream);
  alone.copy(trace::lane_kind::copy_h2d, 3, 20, 30, 64, trace::flag::legacy_stream);
  CHECK_FALSE(find_kind(alone.diagnose(), diagnostic::default_stream_serialization));

  span_builder clean;
  clean.kernel(5, "a", 0, 10);
  clean.kernel(6, "b", 0, 10, trace::flag::blocking_stream);  // blocking, but no legacy stream to serialize with
  CHECK_FALSE(find_kind(clean.diagnose(), diagnostic::default_stream_serialization));
}

TEST_CASE("kernel_filled_device fires when another stream's kernel was ready while a device-filling kernel ran",
          "[trace][diagnostics]") {
  span_builder b;
  b.kernel(1, "big_grid", 0, 10'000, trace::flag::fills_device);
  // Its span begins when its stream reached it (the begin event), 1 ms in; it ran only once big_grid's blocks left.
  b.kernel(2, "small_kernel", 1'000, 10'020);
  b.kernel(3, "copy_only", 2'000, 2'100);  // not SM work: a copy lane
  b.t.spans.back().lane = trace::lane::copy(0, trace::lane_kind::copy_h2d);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::kernel_filled_device);
  REQUIRE(f);
  CHECK(f->occurrences == 1);
  CHECK(names(*f, "big_grid on stream 1 (GPU 0)"));
  CHECK(names(*f, "waited: small_kernel on stream 2 (GPU 0)"));
  CHECK(names(*f, "9.000 ms of waiting"));
}

TEST_CASE("kernel_filled_device is silent without the flag, after the kernel, on its own stream and for short waits",
          "[trace][diagnostics]") {
  auto fires = [](std::uint32_t flags, std::uint64_t other_stream, std::int64_t other_begin) {
    span_builder b;
    b.kernel(1, "big_grid", 0, 10'000, flags);
    b.kernel(other_stream, "small_kernel", other_begin, std::max<std::int64_t>(other_begin + 20, 10'020));
    return find_kind(b.diagnose(), diagnostic::kernel_filled_device) != nullptr;
  };
  CHECK(fires(trace::flag::fills_device, 2, 1'000));   // the provoking case
  CHECK_FALSE(fires(0, 2, 1'000));                      // room beside it: the kernels ran together
  CHECK_FALSE(fires(trace::flag::fills_device, 2, 10'000));  // issued after it
  CHECK_FALSE(fires(trace::flag::fills_device, 1, 1'000));   // its own stream waits for it anyway
  CHECK_FALSE(fires(trace::flag::fills_device, 2, 9'990));   // ready in its last 10 us: launch latency
}
