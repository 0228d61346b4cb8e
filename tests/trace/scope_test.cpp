// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Host scopes and scoped labels.
#include <cuasync/trace/scope.hpp>

#include "recorder_fixture.hpp"

#include <catch2/catch.hpp>

#include <memory>
#include <thread>

namespace trace = cuasync::trace;
using trace::test::fresh_recorder;

TEST_CASE("a scope records a host span on the calling thread's lane with its category and bytes", "[trace]") {
  fresh_recorder on;
  const std::int64_t before = trace::now_ns();
  { trace::scope s(trace::category::sync, "stream.synchronize", 64); }
  const std::int64_t after = trace::now_ns();
  const trace::timeline t = trace::snapshot();
  REQUIRE(t.spans.size() == 1);
  const trace::span& s = t.spans[0];
  CHECK(s.lane == trace::this_thread_lane());
  CHECK(s.category == trace::category::sync);
  CHECK(s.name == "stream.synchronize");
  CHECK(s.bytes == 64);
  CHECK(s.clock == trace::clock_source::host);
  CHECK(s.begin_ns >= before);
  CHECK(s.end_ns <= after);
  CHECK(s.begin_ns <= s.end_ns);
  CHECK(t.origin_ns <= before);
}


TEST_CASE("a scope that began while recording was off records nothing", "[trace]") {
  fresh_recorder on;
  trace::disable();
  {
    trace::scope s(trace::category::sync, "began off");
    trace::enable();
  }
  CHECK(trace::snapshot().spans.empty());
}

TEST_CASE("labels nest, join with ' / ', may end out of order, and belong to their thread", "[trace]") {
  fresh_recorder on;
  CHECK(trace::current_label().empty());
  {
    trace::label outer("request 42");
    CHECK(trace::current_label() == "request 42");
    {
      trace::label inner("decode");
      CHECK(trace::current_label() == "request 42 / decode");
      trace::scope s(trace::category::pipeline_stage, "stage");
    }
    std::thread([] { CHECK(trace::current_label().empty()); }).join();
    auto a = std::make_unique<trace::label>("a");
    auto b = std::make_unique<trace::label>("b");
    CHECK(trace::current_label() == "request 42 / a / b");
    a.reset();  // out of order, as a coroutine frame may
    CHECK(trace::current_label() == "request 42 / b");
    b.reset();
    CHECK(trace::current_label() == "request 42");
  }
  CHECK(trace::current_label().empty());
  const trace::timeline t = trace::snapshot();
  REQUIRE(t.spans.size() == 1);
  CHECK(t.spans[0].label == "request 42 / decode");
}
