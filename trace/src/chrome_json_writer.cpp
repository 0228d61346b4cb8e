// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Writes a timeline as Chrome trace event JSON: metadata events naming processes and lanes, then one complete ("X")
// event per span, then a flow ("s" to "f") from each host issue span to the GPU span it issued, one event per line
// so that committed traces read well in a diff.
#include <cuasync/trace/chrome_json.hpp>

#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <map>
#include <unordered_map>
#include <ostream>
#include <tuple>

namespace cuasync::trace {
namespace {

constexpr int format_version = 1;

// Nanoseconds as microseconds with three decimals, exactly (no floating point on the way).
std::string microseconds(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000), static_cast<unsigned long long>(magnitude % 1000));
  return buf;
}

// Addresses as hex strings: JSON readers (Perfetto's included) hold numbers as doubles, exact only to 2^53.
std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string process_name(const lane& l) {
  return l.kind == lane_kind::host_thread ? "host" : "GPU " + std::to_string(l.device);
}

void metadata(json::writer& w, const char* name, std::int64_t pid, int tid, const char* arg, const std::string& text) {
  w.newline().begin_object().member("ph", "M").member("name", name).member("pid", pid).member("tid", tid);
  w.key("args").begin_object().member(arg, text).end_object().end_object();
}
void metadata(json::writer& w, const char* name, std::int64_t pid, int tid, int sort_index) {
  w.newline().begin_object().member("ph", "M").member("name", name).member("pid", pid).member("tid", tid);
  w.key("args").begin_object().member("sort_index", sort_index).end_object().end_object();
}

// The middle of a span: a flow's end binds to the slice enclosing its time, and a span's begin may be the end of the
// one before it on the same lane.
std::int64_t middle(const span& s) { return s.begin_ns + (s.end_ns - s.begin_ns) / 2; }

}  // namespace

std::int64_t chrome_pid(const timeline& t, const lane& l) noexcept {
  if (l.kind == lane_kind::host_thread) return t.pid > 0 ? t.pid : 1;
  return chrome_gpu_pid_base + l.device;
}

std::string to_chrome_json(const timeline& input) {
  timeline t = input;
  t.normalize();

  json::writer w;
  w.begin_object();
  w.member("displayTimeUnit", "ns");
  w.key("otherData").begin_object();
  w.member("producer", "cuasync").member("format_version", format_version);
  w.member("origin_ns", static_cast<std::int64_t>(t.origin_ns));
  if (t.pid > 0) w.member("pid", t.pid);
  w.member("dropped_records", static_cast<std::uint64_t>(t.dropped));
  w.member("spans", static_cast<std::uint64_t>(t.spans.size()));
  w.key("devices").begin_array();
  for (const device_info& d : t.devices) {
    w.begin_object().member("device", d.device).member("name", d.name);
    w.member("multiprocessors", d.multiprocessors).member("copy_engines", d.copy_engines).end_object();
  }
  w.end_array();
  w.end_object();
  w.key("traceEvents").begin_array();

  // Lanes are in lane order: GPUs first, then the host; tids count from 1 within each process.
  std::map<std::int64_t, int> next_tid;
  std::map<std::tuple<lane_kind, int, std::uint64_t>, int> tid_of;
  for (const lane_info& info : t.lanes) {
    const std::int64_t pid = chrome_pid(t, info.lane);
    if (!next_tid.count(pid)) {
      metadata(w, "process_name", pid, 0, "name", process_name(info.lane));
      // GPUs above the host in the viewer, as in the HTML page.
      metadata(w, "process_sort_index", pid, 0, info.lane.kind == lane_kind::host_thread ? 1000 : info.lane.device);
    }
    const int tid = ++next_tid[pid];
    tid_of[{info.lane.kind, info.lane.device, info.lane.id}] = tid;
    w.newline().begin_object().member("ph", "M").member("name", "thread_name").member("pid", pid).member("tid", tid);
    w.key("args").begin_object().member("name", info.name).member("lane", to_string(info.lane.kind));
    w.member("device", info.lane.device).member("id", static_cast<std::uint64_t>(info.lane.id));
    w.end_object().end_object();
    metadata(w, "thread_sort_index", pid, tid, tid);
  }

  for (const span& s : t.spans) {
    const std::int64_t pid = chrome_pid(t, s.lane);
    const int tid = tid_of[{s.lane.kind, s.lane.device, s.lane.id}];
    w.newline().begin_object().member("ph", "X").member("name", s.name).member("cat", to_string(s.category));
    w.member("pid", pid).member("tid", tid);
    w.key("ts").raw(microseconds(s.begin_ns - t.origin_ns));
    w.key("dur").raw(microseconds(s.end_ns - s.begin_ns));
    w.key("args").begin_object();
    w.member("lane", to_string(s.lane.kind)).member("device", s.lane.device);
    w.member("id", static_cast<std::uint64_t>(s.lane.id));
    if (s.clock == clock_source::gpu_events) w.member("clock", "gpu_events");
    if (s.bytes) w.member("bytes", static_cast<std::uint64_t>(s.bytes));
    if (s.stream_id) w.member("stream", static_cast<std::uint64_t>(s.stream_id));
    if (s.src) w.member("src", hex(s.src));
    if (s.dst) w.member("dst", hex(s.dst));
    if (s.flags) {
      w.key("flags").begin_array();
      for (int bit = 0; bit < flag::count; ++bit)
        if (s.flags & (1u << bit)) w.value(flag_name(bit));
      w.end_array();
    }
    if (!s.label.empty()) w.member("label", s.label);
    if (s.flow) w.member("flow", static_cast<std::uint64_t>(s.flow));
    w.end_object().end_object();
  }

  // Flows: the issue (a host span with the id) to the work (a GPU span with it); an id without both ends (work
  // captured into a graph has no GPU span) draws nothing. In the order of the work's begin.
  std::unordered_map<std::uint64_t, const span*> issue_of;
  for (const span& s : t.spans)
    if (s.flow && s.lane.kind == lane_kind::host_thread) issue_of.emplace(s.flow, &s);
  const auto flow_event = [&](const char* phase, const span& s) {
    w.newline().begin_object().member("ph", phase).member("name", "issue").member("cat", "cuasync.flow");
    w.member("id", static_cast<std::uint64_t>(s.flow));
    w.member("pid", chrome_pid(t, s.lane)).member("tid", tid_of[{s.lane.kind, s.lane.device, s.lane.id}]);
    w.key("ts").raw(microseconds(middle(s) - t.origin_ns));
    if (phase[0] == 'f') w.member("bp", "e");
    w.end_object();
  };
  for (const span& s : t.spans) {
    if (!s.flow || s.lane.kind == lane_kind::host_thread) continue;
    const auto it = issue_of.find(s.flow);
    if (it == issue_of.end()) continue;
    flow_event("s", *it->second);
    flow_event("f", s);
  }
  w.newline().end_array().end_object();
  return w.take() + "\n";
}

void write_chrome_json(const timeline& t, std::ostream& out) { out << to_chrome_json(t); }

}  // namespace cuasync::trace
