// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The Chrome trace event JSON: its structure (checked against the format), the reader's round trip, other producers'
// traces, malformed input, and the committed test trace.
#include <cuasync/trace/chrome_json.hpp>

#include <cuasync/trace/json.hpp>

#include "chrome_format_check.hpp"
#include "read_file.hpp"
#include "synthetic_pipeline.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

namespace trace = cuasync::trace;
namespace json = cuasync::trace::json;

TEST_CASE("the Chrome JSON of a pipeline follows the trace event format", "[trace][chrome]") {
  const trace::timeline t = trace::test::pipeline_timeline();
  const json::value root = json::parse(trace::to_chrome_json(t));
  const auto problems = trace::test::chrome_format_problems(root);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());

  // One X event per span, one thread_name per lane, named processes for GPU 0 and the host (pid 1: unknown).
  std::size_t complete = 0;
  std::set<std::string> thread_names, process_names;
  for (const json::value& e : root.find("traceEvents")->as_array()) {
    if (e.find("ph")->as_string() == "X") ++complete;
    if (e.find("name")->as_string() == "thread_name") thread_names.insert(e.find("args")->find("name")->as_string());
    if (e.find("name")->as_string() == "process_name")
      process_names.insert(e.find("args")->find("name")->as_string());
  }
  CHECK(complete == t.spans.size());
  CHECK(thread_names == std::set<std::string>{"H2D (GPU 0)", "D2H (GPU 0)", "stream 11 (GPU 0)", "stream 12 (GPU 0)",
                                              "stream 13 (GPU 0)", "io thread", "postprocess thread"});
  CHECK(process_names == std::set<std::string>{"GPU 0", "host"});
  const json::value& other = *root.find("otherData");
  CHECK(other.find("producer")->as_string() == "cuasync");
  CHECK(other.find("dropped_records")->as_number() == 0);
  CHECK(other.find("origin_ns")->as_number() == trace::test::pipeline_origin_ns);
}

TEST_CASE("an X event carries the span's category, times in microseconds and its arguments", "[trace][chrome]") {
  trace::timeline t;
  t.origin_ns = 5'000;
  trace::span s;
  s.lane = trace::lane::copy(1, trace::lane_kind::copy_d2h);
  s.category = trace::category::staged_copy_chunk;
  s.clock = trace::clock_source::gpu_events;
  s.begin_ns = 6'234;  // 1.234 µs after the origin
  s.end_ns = 8'235;
  s.bytes = 8 << 20;
  s.stream_id = 9;
  s.name = "chunk 3";
  s.label = "upload <weights> & \"bias\"";
  t.spans.push_back(s);
  t.dropped = 17;
  const std::string text = trace::to_chrome_json(t);
  CHECK(text.find("\"ts\":1.234,\"dur\":2.001") != std::string::npos);
  const json::value root = json::parse(text);
  CHECK(trace::test::chrome_format_problems(root).empty());
  const json::value* x = nullptr;
  for (const json::value& e : root.find("traceEvents")->as_array())
    if (e.find("ph")->as_string() == "X") x = &e;
  REQUIRE(x);
  CHECK(x->find("cat")->as_string() == "staged_copy_chunk");
  CHECK(x->find("pid")->as_number() == static_cast<double>(trace::chrome_gpu_pid_base + 1));  // GPU 1
  const json::value& args = *x->find("args");
  CHECK(args.find("lane")->as_string() == "d2h");
  CHECK(args.find("bytes")->as_number() == 8 << 20);
  CHECK(args.find("stream")->as_number() == 9);
  CHECK(args.find("label")->as_string() == s.label);
  CHECK(args.find("clock")->as_string() == "gpu_events");
  CHECK(root.find("otherData")->find("dropped_records")->as_number() == 17);
}

TEST_CASE("the reader gives back exactly the timeline that was written", "[trace][chrome]") {
  trace::timeline t = trace::test::pipeline_timeline();
  t.dropped = 3;
  trace::span before_origin;  // a GPU span converted to slightly before the origin: negative ts
  before_origin.lane = trace::lane::stream(0, 11);
  before_origin.category = trace::category::memset;
  before_origin.begin_ns = trace::test::pipeline_origin_ns - 1'500;
  before_origin.end_ns = trace::test::pipeline_origin_ns - 1;
  t.spans.push_back(before_origin);
  t.normalize();
  std::size_t skipped = 99;
  const trace::timeline back = trace::read_chrome_json(trace::to_chrome_json(t), &skipped);
  CHECK(skipped == 0);
  CHECK(back.origin_ns == t.origin_ns);
  CHECK(back.dropped == 3);
  CHECK(back.lanes == t.lanes);
  REQUIRE(back.spans.size() == t.spans.size());
  for (std::size_t i = 0; i < t.spans.size(); ++i) {
    INFO(i);
    CHECK(back.spans[i] == t.spans[i]);
  }
}

TEST_CASE("the committed test trace is what the generator writes, and reads back", "[trace][chrome]") {
  const std::string committed = trace::test::read_file(CUASYNC_TRACE_TEST_DATA "/pipeline_trace.json");
  REQUIRE_FALSE(committed.empty());
  CHECK(committed == trace::to_chrome_json(trace::test::pipeline_timeline()));
  const trace::timeline t = trace::read_chrome_json(committed);
  CHECK(t.spans.size() == 31);
  CHECK(t.lanes.size() == 7);
}

TEST_CASE("each host issue gets a flow to the GPU span it issued, in the host's real pid, and reads back",
          "[trace][chrome]") {
  trace::timeline t = trace::test::scaled_pipeline_timeline(2, 3);  // 6 batches, 3 linked issues each
  REQUIRE(t.pid == 4242);
  // An issue whose work was never timed (captured into a graph) has no partner: no flow.
  t.spans.push_back(t.spans.front());
  t.spans.back().lane = trace::lane::host_thread(1);
  t.spans.back().begin_ns = t.spans.back().end_ns = t.last_end_ns() + 1'000;
  t.spans.back().flow = 999'999;
  t.normalize();
  const std::string text = trace::to_chrome_json(t);
  const json::value root = json::parse(text);
  const auto problems = trace::test::chrome_format_problems(root);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());

  std::map<double, std::pair<const json::value*, const json::value*>> flows;  // id: start, end
  std::set<double> host_pids, gpu_pids;
  for (const json::value& e : root.find("traceEvents")->as_array()) {
    const std::string& ph = e.find("ph")->as_string();
    if (ph == "s") flows[e.find("id")->as_number()].first = &e;
    if (ph == "f") flows[e.find("id")->as_number()].second = &e;
    if (ph == "X")
      (e.find("args")->find("lane")->as_string() == "thread" ? host_pids : gpu_pids).insert(e.find("pid")->as_number());
  }
  CHECK(host_pids == std::set<double>{4242});
  CHECK(gpu_pids == std::set<double>{static_cast<double>(trace::chrome_gpu_pid_base)});
  CHECK(root.find("otherData")->find("pid")->as_number() == 4242);
  REQUIRE(flows.size() == 18);
  for (const auto& [id, ends] : flows) {
    REQUIRE(ends.first);
    REQUIRE(ends.second);
    CHECK(ends.first->find("pid")->as_number() == 4242);
    CHECK(ends.second->find("pid")->as_number() == static_cast<double>(trace::chrome_gpu_pid_base));
    CHECK(ends.second->find("bp")->as_string() == "e");
    CHECK(ends.first->find("cat")->as_string() == ends.second->find("cat")->as_string());
    CHECK(ends.first->find("ts")->as_number() < ends.second->find("ts")->as_number());  // issue, then work
  }

  // Read back: the same spans, flow ids included; the flow events are neither spans nor skipped.
  std::size_t skipped = 1;
  const trace::timeline back = trace::read_chrome_json(text, &skipped);
  CHECK(skipped == 0);
  CHECK(back.pid == 4242);
  REQUIRE(back.spans.size() == t.spans.size());
  for (std::size_t i = 0; i < t.spans.size(); ++i) CHECK(back.spans[i] == t.spans[i]);
}

TEST_CASE("another tool's flow events are passed over, not counted as skipped", "[trace][chrome]") {
  const char* kineto = R"([
    {"ph": "X", "name": "cudaLaunchKernel", "pid": 7, "tid": 70, "ts": 10, "dur": 5, "cat": "cuda_runtime"},
    {"ph": "s", "id": 1, "pid": 7, "tid": 70, "ts": 10, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "name": "kernel", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "cat": "kernel"},
    {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "t", "id": 1, "pid": 0, "tid": 7, "ts": 21, "cat": "ac2g", "name": "ac2g"}
  ])";
  std::size_t skipped = 1;
  const trace::timeline t = trace::read_chrome_json(kineto, &skipped);
  CHECK(skipped == 0);
  CHECK(t.spans.size() == 2);
}

TEST_CASE("other producers' complete and duration events become thread lanes; other phases are skipped",
          "[trace][chrome]") {
  const char* foreign = R"([
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 70, "args": {"name": "main"}},
    {"ph": "X", "name": "step", "cat": "frame,gpu", "pid": 7, "tid": 70, "ts": 10, "dur": 5},
    {"ph": "X", "name": "io", "pid": 7, "tid": 71, "ts": 12.5, "dur": 1},
    {"ph": "B", "name": "begin", "pid": 7, "tid": 70, "ts": 11},
    {"ph": "i", "name": "instant", "pid": 7, "tid": 70, "ts": 11, "s": "t"}
  ])";
  std::size_t skipped = 0;
  const trace::timeline t = trace::read_chrome_json(foreign, &skipped);
  CHECK(skipped == 1);  // the instant event
  REQUIRE(t.spans.size() == 3);
  const auto named = [&](const std::string& name) -> const trace::span& {
    for (const trace::span& s : t.spans)
      if (s.name == name) return s;
    FAIL("no span " << name);
    return t.spans[0];
  };
  const trace::span& step = named("step");
  const trace::span& io = named("io");
  CHECK(step.category == trace::category::user);
  CHECK(step.begin_ns == 10'000);
  CHECK(step.end_ns == 15'000);
  CHECK(io.begin_ns == 12'500);
  CHECK(step.lane.kind == trace::lane_kind::host_thread);
  CHECK_FALSE(step.lane == io.lane);
  // A "B" never ended (the trace was cut while it ran) lasts to the trace's end, as viewers draw it.
  CHECK(named("begin").begin_ns == 11'000);
  CHECK(named("begin").end_ns == 15'000);
  CHECK(named("begin").lane == step.lane);
  REQUIRE(t.lanes.size() == 2);
  CHECK(t.lane_name(step.lane) == "main");
  CHECK(t.lane_name(io.lane) == "pid 7 tid 71");
}

TEST_CASE("duration events nest per thread: an E ends its thread's innermost open B", "[trace][chrome]") {
  const char* nested = R"({"traceEvents": [
    {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10, "args": {"bytes": 4096}},
    {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12},
    {"ph": "B", "name": "elsewhere", "pid": 1, "tid": 2, "ts": 13},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 14},
    {"ph": "E", "pid": 1, "tid": 2, "ts": 20},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 31}
  ]})";
  std::size_t skipped = 0;
  const trace::timeline t = trace::read_chrome_json(nested, &skipped);
  CHECK(skipped == 1);  // the last E has no B left to end
  REQUIRE(t.spans.size() == 3);
  std::map<std::string, trace::span> by_name;
  for (const trace::span& s : t.spans) by_name[s.name] = s;
  CHECK(by_name["outer"].begin_ns == 10'000);
  CHECK(by_name["outer"].end_ns == 30'000);
  CHECK(by_name["outer"].bytes == 4096);
  CHECK(by_name["inner"].begin_ns == 12'000);
  CHECK(by_name["inner"].end_ns == 14'000);
  CHECK(by_name["elsewhere"].end_ns == 20'000);
  CHECK(by_name["outer"].lane == by_name["inner"].lane);
  CHECK_FALSE(by_name["outer"].lane == by_name["elsewhere"].lane);
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "B", "name": "a", "ts": 5}, {"ph": "E", "ts": 4}])"),
                    Catch::Contains("event 1") && Catch::Contains("before its"));
}

TEST_CASE("malformed traces are refused with the event and the problem", "[trace][chrome]") {
  CHECK_THROWS_AS(trace::read_chrome_json("{\"traceEvents\": [}"), json::parse_error);
  CHECK_THROWS_WITH(trace::read_chrome_json("{\"events\": []}"), Catch::Contains("traceEvents"));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a", "ts": 1, "dur": -1}])"),
                    Catch::Contains("event 0") && Catch::Contains("negative"));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a"}])"), Catch::Contains("\"ts\""));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a", "ts": "1"}])"), Catch::Contains("time"));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a", "ts": 1, "pid": 1.5}])"),
                    Catch::Contains("pid"));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a", "ts": 1e300}])"), Catch::Contains("time"));
}

TEST_CASE("another tool's trace reads: epoch timestamps, string pid and tid, its own args of cuasync's names",
          "[trace][chrome]") {
  // PyTorch's profiler (Kineto): microseconds since the Unix epoch, "pid": "Spans", and args of its own.
  const trace::timeline t = trace::read_chrome_json(R"({"traceEvents": [
      {"ph": "X", "name": "aten::add", "ts": 1712667379478076, "dur": 12, "pid": 3771, "tid": 3771,
       "args": {"stream": "0x7f00", "flags": 3, "bytes": 1.5, "src": "rank 0", "lane": "main"}},
      {"ph": "X", "name": "step", "ts": 1712667379478100, "dur": 40, "pid": "Spans", "tid": "PyTorch Profiler"},
      {"ph": "X", "name": "later", "ts": 1712667379478176.5, "dur": 1, "pid": 3771, "tid": 3771}]})");
  REQUIRE(t.spans.size() == 3);
  CHECK(t.spans[0].end_ns - t.spans[0].begin_ns == 12'000);
  CHECK(t.spans[2].begin_ns - t.spans[0].begin_ns == 100'500);  // read relative to the first event, exactly
  CHECK(t.spans[0].stream_id == 0);  // another tool's "stream" string: left out, not an error
  CHECK(t.spans[0].lane.kind == trace::lane_kind::host_thread);
  bool named_by_string = false;
  for (const auto& l : t.lanes) named_by_string |= l.name == "pid Spans tid PyTorch Profiler";
  CHECK(named_by_string);
  // Their threads never share a lane with cuasync's own thread lanes.
  const trace::timeline merged = trace::read_chrome_json(R"([
      {"ph": "X", "name": "mine", "ts": 1, "dur": 1, "pid": 1, "tid": 1,
       "args": {"lane": "thread", "device": -1, "id": 1}},
      {"ph": "X", "name": "theirs", "ts": 2, "dur": 1, "pid": 99, "tid": 7}])");
  REQUIRE(merged.spans.size() == 2);
  CHECK_FALSE(merged.spans[0].lane == merged.spans[1].lane);
  // Spread over more than the bound from the first event: still refused.
  CHECK_THROWS_WITH(trace::read_chrome_json(R"([{"ph": "X", "name": "a", "ts": 1},
                                                {"ph": "X", "name": "b", "ts": 1e15}])"),
                    Catch::Contains("time"));
}

TEST_CASE("numbers beyond what a trace holds are refused, so nothing computed from a timeline overflows",
          "[trace][chrome]") {
  for (const char* bad : {
           R"([{"ph": "X", "name": "a", "ts": 1e18, "dur": 1}])",
           R"([{"ph": "X", "name": "a", "ts": 1, "dur": 1e15}])",
           R"({"otherData": {"origin_ns": 1e19}, "traceEvents": []})",
           R"({"otherData": {"dropped_records": -1}, "traceEvents": []})",
           R"([{"ph": "X", "name": "a", "ts": 1, "args": {"lane": "stream", "device": 1e9}}])",
           R"([{"ph": "X", "name": "a", "ts": 1, "args": {"lane": "stream", "id": -1}}])",
           R"([{"ph": "X", "name": "a", "ts": 1, "args": {"lane": "h2d", "device": 0, "bytes": 1e17}}])",
           R"([{"ph": "X", "name": "a", "ts": 1, "tid": 1e300}])",
       }) {
    INFO(bad);
    CHECK_THROWS_WITH(trace::read_chrome_json(bad), Catch::Contains("range") || Catch::Contains("time"));
  }
}

TEST_CASE("the diagnostics' facts read back: flags, addresses, the devices", "[trace][chrome]") {
  trace::timeline t;
  t.devices = {{0, "NVIDIA H200", 132, 3}, {1, "other \"GPU\"", 8, 1}};
  trace::span s;
  s.lane = trace::lane::copy(0, trace::lane_kind::copy_d2h);
  s.category = trace::category::copy;
  s.begin_ns = 10;
  s.end_ns = 20;
  s.bytes = 4096;
  s.stream_id = 7;
  s.src = 0x7f00'0000'1000;
  s.dst = 0xffff'ffff'ffff'fff0;  // beyond a double's exact integers: written as a hex string
  s.flags = trace::flag::pageable_host | trace::flag::legacy_stream | trace::flag::stream_ordered;
  t.spans.push_back(s);
  s.lane = trace::lane::host_thread(1);
  s.flags =
      trace::flag::device_wide | trace::flag::host_wait | trace::flag::fills_device | trace::flag::blocking_stream;
  s.src = s.dst = 0;
  t.spans.push_back(s);
  t.normalize();
  const std::string text = trace::to_chrome_json(t);
  CHECK(text.find(R"("src":"0x7f0000001000","dst":"0xfffffffffffffff0")") != std::string::npos);
  CHECK(text.find(R"("flags":["pageable_host","legacy_stream","stream_ordered"])") != std::string::npos);
  const trace::timeline back = trace::read_chrome_json(text);
  CHECK(back.devices == t.devices);
  REQUIRE(back.spans.size() == 2);
  CHECK(back.spans[0] == t.spans[0]);
  CHECK(back.spans[1] == t.spans[1]);
}

TEST_CASE("unknown flag names are ignored; bad addresses and flags in cuasync's events are refused",
          "[trace][chrome]") {
  const trace::timeline t = trace::read_chrome_json(
      R"([{"ph": "X", "name": "a", "ts": 1, "args": {"flags": ["from_a_later_version", "host_wait"]}}])");
  REQUIRE(t.spans.size() == 1);
  CHECK(t.spans[0].flags == trace::flag::host_wait);
  const std::string ours = R"([{"ph": "X", "name": "a", "ts": 1, "args": {"lane": "h2d", "device": 0, )";
  for (const char* bad : {R"("src": 4096)", R"("src": "4096")", R"("dst": "0x")", R"("dst": "0x12g4")",
                          R"("dst": "0x1234567890abcdef0")"}) {
    INFO(bad);
    CHECK_THROWS_WITH(trace::read_chrome_json(ours + bad + "}}]"), Catch::Contains("address"));
  }
  CHECK_THROWS_WITH(trace::read_chrome_json(ours + R"("flags": "host_wait"}}])"), Catch::Contains("flags"));
  CHECK_THROWS_WITH(trace::read_chrome_json(ours + R"("flags": [3]}}])"), Catch::Contains("flag"));
  CHECK_THROWS_WITH(trace::read_chrome_json(R"({"otherData": {"devices": [{"copy_engines": -2}]}, "traceEvents": []})"),
                    Catch::Contains("copy_engines"));
}
