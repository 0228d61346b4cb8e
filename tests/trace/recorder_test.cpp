// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The recorder: off by default, on by API, per-thread buffers merged, the cap and its dropped count, labels, flush.
#include <cuasync/trace/recorder.hpp>

#include <cuasync/trace/scope.hpp>  // scopes make spans for the thread tests

#include "read_file.hpp"
#include "recorder_fixture.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

namespace trace = cuasync::trace;
using trace::test::fresh_recorder;

namespace {
trace::span host_span(std::int64_t begin, std::int64_t end, std::string name = "s") {
  trace::span s;
  s.lane = trace::this_thread_lane();
  s.begin_ns = begin;
  s.end_ns = end;
  s.name = std::move(name);
  return s;
}
}  // namespace

TEST_CASE("the recorder is off by default and records nothing while off", "[trace]") {
  // Unless CUASYNC_TRACE turned it on before main, it is off; either way the fixtures leave it off.
  if (!std::getenv("CUASYNC_TRACE")) REQUIRE_FALSE(trace::enabled());
  trace::disable();
  trace::record(host_span(1, 2));
  { trace::scope s(trace::category::sync, "off"); }
  CHECK(trace::snapshot().spans.empty());
  CHECK(trace::snapshot().dropped == 0);
}

TEST_CASE("enabled, the recorder keeps spans until disabled, and clear() drops them", "[trace]") {
  fresh_recorder on;
  REQUIRE(trace::enabled());
  trace::record(host_span(10, 20, "first"));
  trace::record(host_span(40, 30, "reversed"));  // begin and end swapped by the recorder
  trace::disable();
  trace::record(host_span(50, 60, "after disable"));
  const trace::timeline t = trace::snapshot();
  REQUIRE(t.spans.size() == 2);
  CHECK(t.spans[0].name == "first");
  CHECK(t.spans[1].name == "reversed");
  CHECK(t.spans[1].begin_ns == 30);
  CHECK(t.spans[1].end_ns == 40);
  REQUIRE(t.lanes.size() == 1);
  CHECK(t.lanes[0].lane == trace::this_thread_lane());
  trace::clear();
  CHECK(trace::snapshot().spans.empty());
}

TEST_CASE("threads record into their own lanes, and the export merges them in time order", "[trace]") {
  fresh_recorder on;
  constexpr int threads = 4, per_thread = 2000;
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i)
    workers.emplace_back([i] {
      trace::name_this_thread("worker " + std::to_string(i));
      for (int k = 0; k < per_thread; ++k) trace::scope s(trace::category::user, "work");
    });
  // Exports while the workers record: consistent, never torn.
  for (int k = 0; k < 20; ++k) CHECK(trace::snapshot().spans.size() <= threads * per_thread);
  for (auto& w : workers) w.join();
  const trace::timeline t = trace::snapshot();
  CHECK(t.spans.size() == threads * per_thread);
  CHECK(t.dropped == 0);
  std::set<std::uint64_t> ordinals;
  for (const auto& s : t.spans) ordinals.insert(s.lane.id);
  CHECK(ordinals.size() == threads);
  CHECK(std::is_sorted(t.spans.begin(), t.spans.end(),
                       [](const trace::span& a, const trace::span& b) { return a.begin_ns < b.begin_ns; }));
  REQUIRE(t.lanes.size() == threads);
  std::set<std::string> names;
  for (const auto& l : t.lanes) names.insert(l.name);
  CHECK(names == std::set<std::string>{"worker 0", "worker 1", "worker 2", "worker 3"});
}

TEST_CASE("the cap bounds what is kept and counts what it refused, across threads", "[trace]") {
  trace::options o;
  o.max_records = 100;
  fresh_recorder on(o);
  std::vector<std::thread> workers;
  for (int i = 0; i < 3; ++i)
    workers.emplace_back([] {
      for (int k = 0; k < 50; ++k) trace::record(host_span(k, k + 1));
    });
  for (auto& w : workers) w.join();
  trace::timeline t = trace::snapshot();
  CHECK(t.spans.size() == 100);
  CHECK(t.dropped == 50);
  trace::clear();  // resets the count: the cap applies anew
  trace::record(host_span(1, 2));
  t = trace::snapshot();
  CHECK(t.spans.size() == 1);
  CHECK(t.dropped == 0);
}

TEST_CASE("names and labels are cut to max_text_bytes at a character boundary", "[trace]") {
  fresh_recorder on;
  std::string long_name(trace::max_text_bytes - 1, 'x');
  long_name += "\xc3\xa9\xc3\xa9";  // "éé": the cut falls inside the first é
  trace::record(host_span(1, 2, long_name));
  const trace::timeline t = trace::snapshot();
  REQUIRE(t.spans.size() == 1);
  CHECK(t.spans[0].name == std::string(trace::max_text_bytes - 1, 'x'));
}

TEST_CASE("flush writes the trace to the output path, JSON or HTML by its name", "[trace]") {
  const auto dir = std::filesystem::temp_directory_path() / ("cuasync_trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"trace.json", "timeline.html"}) {
    trace::options o;
    o.output = dir / name;
    fresh_recorder on(o);
    trace::record(host_span(1, 1000, "flushed"));
    CHECK(trace::flush() == dir / name);
    const std::string text = trace::test::read_file(dir / name);
    CHECK(text.find("flushed") != std::string::npos);
    if (std::string(name).ends_with(".html"))
      CHECK(text.starts_with("<!DOCTYPE html>"));
    else
      CHECK(text.find("\"traceEvents\"") != std::string::npos);
  }
  {
    fresh_recorder on;  // no output: flush writes nothing
    CHECK(trace::flush().empty());
  }
  trace::options o;
  o.output = dir / "missing-folder" / "trace.json";
  fresh_recorder on(o);
  CHECK_THROWS_WITH(trace::flush(), Catch::Contains("missing-folder"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("flow ids are nonzero, unique across threads, exact in a double, and a snapshot carries the pid",
          "[trace]") {
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(trace::new_flow_id());
  std::vector<std::uint64_t> other;
  std::thread([&] {
    for (int i = 0; i < 1000; ++i) other.push_back(trace::new_flow_id());
  }).join();
  ids.insert(ids.end(), other.begin(), other.end());
  CHECK(std::set<std::uint64_t>(ids.begin(), ids.end()).size() == ids.size());
  for (const std::uint64_t id : ids) {
    CHECK(id != 0);
    CHECK(id < (std::uint64_t{1} << 53));
  }

  fresh_recorder recording;
  trace::span s = host_span(1, 2);
  s.flow = ids.front();
  trace::record(s);
  const trace::timeline t = trace::snapshot();
  CHECK(t.pid == static_cast<std::int64_t>(getpid()));
  REQUIRE(t.spans.size() == 1);
  CHECK(t.spans[0].flow == ids.front());
}
