// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reads Chrome trace event JSON back into a timeline: cuasync's own files exactly (lanes from the events' args),
// other producers' complete events ("X") and duration events ("B" ... "E", nested per thread) as thread lanes; flow
// events are passed over.
#include <cuasync/trace/chrome_json.hpp>

#include <cuasync/trace/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <stdexcept>
#include <utility>

namespace cuasync::trace {
namespace {

[[noreturn]] void bad_event(std::size_t index, const std::string& what) {
  throw std::runtime_error("trace event " + std::to_string(index) + ": " + what);
}

// Bounds that keep every later computation in range: the sum of three stages' busy times over a window of spans
// must fit in an int64, and counts must be exact in a double.
constexpr double max_count = 9007199254740992.0;  // 2^53
constexpr double max_time_us = 1e14;                // ~3 years, as ts, dur and the origin
constexpr double max_origin_ns = 1e18;
constexpr double max_epoch_us = 1e17;  // a first timestamp up to here is an origin to read the trace from

// A whole number in [lowest, highest].
std::int64_t whole(const json::value& v, std::size_t index, const char* what, double lowest, double highest) {
  if (!v.is_integer() || v.as_number() < lowest || v.as_number() > highest)
    bad_event(index, std::string(what) + " is not a whole number in range");
  return static_cast<std::int64_t>(v.as_number());
}
std::uint64_t count(const json::value& v, std::size_t index, const char* what) {
  return static_cast<std::uint64_t>(whole(v, index, what, 0, max_count));
}

// Microseconds (a JSON number) as nanoseconds.
std::int64_t nanoseconds(const json::value& v, std::size_t index, const char* what) {
  if (!v.is_number() || !(std::fabs(v.as_number()) <= max_time_us)) bad_event(index, std::string(what) + " is not a time");
  return std::llround(v.as_number() * 1000.0);
}

const json::value& required(const json::value& event, const char* key, std::size_t index) {
  const json::value* v = event.find(key);
  if (!v) bad_event(index, std::string("no \"") + key + "\"");
  return *v;
}

// The lane an event's args name ("lane", "device", "id"), if they do.
std::optional<lane> lane_from_args(const json::value* args, std::size_t index) {
  if (!args || !args->is_object()) return std::nullopt;
  const json::value* kind = args->find("lane");
  if (!kind || !kind->is_string()) return std::nullopt;
  const auto k = lane_kind_from_string(kind->as_string());
  if (!k) return std::nullopt;  // another tool's "lane" arg: its event goes on a thread lane like any other
  lane l;
  l.kind = *k;
  if (const json::value* d = args->find("device"))
    l.device = static_cast<int>(whole(*d, index, "device", -1, 1 << 20));
  if (const json::value* id = args->find("id")) l.id = count(*id, index, "id");
  return l;
}

// "0x1f00" (the writer's form) as a number.
std::uint64_t address(const json::value& v, std::size_t index, const char* what) {
  if (!v.is_string()) bad_event(index, std::string(what) + " is not an address string");
  const std::string& text = v.as_string();
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X'))
    bad_event(index, std::string(what) + " is not a hex address");
  std::uint64_t n = 0;
  for (std::size_t k = 2; k < text.size(); ++k) {
    const char c = text[k];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) bad_event(index, std::string(what) + " is not a hex address");
    n = n * 16 + static_cast<std::uint64_t>(digit);
  }
  return n;
}

// The flag bits named in an array (unknown names, another version's, are ignored).
std::uint32_t flags_of(const json::value& v, std::size_t index) {
  if (!v.is_array()) bad_event(index, "\"flags\" is not an array");
  std::uint32_t bits = 0;
  for (const json::value& name : v.as_array()) {
    if (!name.is_string()) bad_event(index, "a flag is not a string");
    for (int bit = 0; bit < flag::count; ++bit)
      if (flag_name(bit) == name.as_string()) bits |= 1u << bit;
  }
  return bits;
}

std::vector<device_info> devices_of(const json::value& v) {
  if (!v.is_array()) bad_event(0, "otherData.devices is not an array");
  std::vector<device_info> out;
  for (const json::value& d : v.as_array()) {
    if (!d.is_object()) bad_event(0, "a device is not an object");
    device_info info;
    if (const json::value* n = d.find("device")) info.device = static_cast<int>(whole(*n, 0, "device", 0, 1 << 20));
    if (const json::value* n = d.find("name"); n && n->is_string()) info.name = n->as_string();
    if (const json::value* n = d.find("multiprocessors"))
      info.multiprocessors = static_cast<int>(whole(*n, 0, "multiprocessors", 0, 1 << 20));
    if (const json::value* n = d.find("copy_engines"))
      info.copy_engines = static_cast<int>(whole(*n, 0, "copy_engines", 0, 1 << 20));
    out.push_back(std::move(info));
  }
  return out;
}

using thread_key = std::pair<std::int64_t, std::int64_t>;  // (pid, tid)

// Another producer's threads get lanes numbered from here, above any thread ordinal cuasync writes, so that a trace
// merged from both never draws one's spans on the other's lane.
constexpr std::uint64_t foreign_lane_base = std::uint64_t{1} << 32;

// pid and tid: numbers, or strings (PyTorch's profiler writes "Spans" / "PyTorch Profiler"), each string given an
// id past every number's range and kept for the lane's name.
struct thread_ids {
  std::map<std::string, std::int64_t> by_name;
  std::map<std::int64_t, std::string> names;
  std::int64_t id(const json::value* v, std::size_t index, const char* what) {
    if (!v) return 0;
    if (v->is_string()) {
      auto [it, added] = by_name.try_emplace(v->as_string(), static_cast<std::int64_t>(max_count) + 1 +
                                                                 static_cast<std::int64_t>(by_name.size()));
      if (added) names[it->second] = it->first;
      return it->second;
    }
    return whole(*v, index, what, -max_count, max_count);
  }
  std::string name(std::int64_t id) const {
    auto it = names.find(id);
    return it != names.end() ? it->second : std::to_string(id);
  }
};

// Timestamps are microseconds from any origin: PyTorch's profiler writes them since the Unix epoch (~1.7e15), past
// the bound every later computation relies on. Such a trace is read relative to its first event.
double time_base_us(const json::array& list) {
  double lowest = 0;
  bool any = false;
  for (const json::value& e : list) {
    if (!e.is_object()) continue;
    const json::value* ts = e.find("ts");
    if (!ts || !ts->is_number() || !std::isfinite(ts->as_number())) continue;
    lowest = any ? std::min(lowest, ts->as_number()) : ts->as_number();
    any = true;
  }
  // Up to ~3,000 years from the origin: an epoch, not garbage (1e300 stays refused).
  return any && std::fabs(lowest) > max_time_us && std::fabs(lowest) <= max_epoch_us ? std::floor(lowest) : 0.0;
}

}  // namespace

timeline read_chrome_json(std::string_view text, std::size_t* skipped_events) {
  const json::value root = json::parse(text);
  const json::value* events = root.is_array() ? &root : root.find("traceEvents");
  if (!events || !events->is_array()) throw std::runtime_error("not a Chrome trace: no \"traceEvents\" array");

  timeline t;
  if (const json::value* other = root.find("otherData")) {
    if (const json::value* origin = other->find("origin_ns"))
      t.origin_ns = whole(*origin, 0, "otherData.origin_ns", -max_origin_ns, max_origin_ns);
    if (const json::value* pid = other->find("pid")) t.pid = static_cast<std::int64_t>(count(*pid, 0, "otherData.pid"));
    if (const json::value* dropped = other->find("dropped_records")) t.dropped = count(*dropped, 0, "dropped_records");
    if (const json::value* devices = other->find("devices")) t.devices = devices_of(*devices);
  }

  std::map<thread_key, lane_info> named;  // from thread_name metadata
  std::map<thread_key, lane> foreign;     // (pid, tid) of events without lane args, as thread lanes
  std::map<thread_key, std::vector<std::size_t>> open;  // per thread, the "B" events not ended yet (spans' indexes)
  thread_ids ids;
  std::size_t skipped = 0;
  const json::array& list = events->as_array();
  const double base_us = time_base_us(list);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json::value& e = list[i];
    if (!e.is_object()) bad_event(i, "not an object");
    const json::value& ph = required(e, "ph", i);
    if (!ph.is_string()) bad_event(i, "\"ph\" is not a string");
    const json::value* pid = e.find("pid");
    const json::value* tid = e.find("tid");
    const thread_key key{ids.id(pid, i, "pid"), ids.id(tid, i, "tid")};
    const json::value* args = e.find("args");

    if (ph.as_string() == "M") {
      const json::value* name = e.find("name");
      const json::value* arg_name = args ? args->find("name") : nullptr;
      if (name && name->is_string() && name->as_string() == "thread_name" && arg_name && arg_name->is_string()) {
        lane_info info;
        info.name = arg_name->as_string();
        if (auto l = lane_from_args(args, i)) info.lane = *l;
        else info.lane = lane::host_thread(0);  // placed when an event of that (pid, tid) is read
        named[key] = std::move(info);
      }
      continue;
    }
    const std::string& phase = ph.as_string();
    const auto time_of = [&](const json::value& ts) {
      const bool rebased = base_us != 0.0 && ts.is_number();
      return t.origin_ns + nanoseconds(rebased ? json::value(ts.as_number() - base_us) : ts, i, "ts");
    };
    if (phase == "E") {
      // Ends the innermost open "B" of its thread (the format nests them per thread, in file order).
      std::vector<std::size_t>& stack = open[key];
      if (stack.empty()) {
        ++skipped;  // an end without a beginning (a trace cut at its start)
        continue;
      }
      span& begun = t.spans[stack.back()];
      stack.pop_back();
      begun.end_ns = time_of(required(e, "ts", i));
      if (begun.end_ns < begun.begin_ns) bad_event(i, "an \"E\" event before its \"B\"");
      continue;
    }
    // Flow events link two slices and have no span of their own: cuasync's link is read from its X events' args.
    if (phase == "s" || phase == "t" || phase == "f") continue;
    if (phase != "X" && phase != "B") {
      ++skipped;
      continue;
    }

    span s;
    const json::value& name = required(e, "name", i);
    if (!name.is_string()) bad_event(i, "\"name\" is not a string");
    s.name = name.as_string();
    if (const json::value* cat = e.find("cat"); cat && cat->is_string())
      s.category = category_from_string(cat->as_string()).value_or(category::user);
    s.begin_ns = time_of(required(e, "ts", i));
    const std::int64_t dur = phase == "X" && e.find("dur") ? nanoseconds(*e.find("dur"), i, "dur") : 0;
    if (dur < 0) bad_event(i, "negative \"dur\"");
    s.end_ns = s.begin_ns + dur;  // a "B" event's end comes with its "E"

    const std::optional<lane> own = lane_from_args(args, i);
    if (own) {
      s.lane = *own;
    } else if (auto it = named.find(key); it != named.end() && it->second.lane.id != 0) {
      s.lane = it->second.lane;
    } else {
      // Another producer's thread: a lane of its own, numbered in order of appearance.
      auto [f, added] = foreign.try_emplace(key, lane::host_thread(foreign_lane_base + foreign.size()));
      s.lane = f->second;
    }
    if (args && args->is_object()) {
      // cuasync's own events are read strictly (a malformed field is a damaged file); another tool's args may use
      // the same names for other things ("stream": "0x7f00", "flags": 3): a field that does not parse is left out.
      const auto field = [&](auto&& read) {
        if (own) return read();
        try {
          read();
        } catch (const std::runtime_error&) {
        }
      };
      if (const json::value* b = args->find("bytes")) field([&] { s.bytes = count(*b, i, "bytes"); });
      if (const json::value* st = args->find("stream")) field([&] { s.stream_id = count(*st, i, "stream"); });
      if (const json::value* a = args->find("src")) field([&] { s.src = address(*a, i, "src"); });
      if (const json::value* a = args->find("dst")) field([&] { s.dst = address(*a, i, "dst"); });
      if (const json::value* f = args->find("flags")) field([&] { s.flags = flags_of(*f, i); });
      if (const json::value* f = args->find("flow")) field([&] { s.flow = count(*f, i, "flow"); });
      if (const json::value* l = args->find("label"); l && l->is_string()) s.label = l->as_string();
      if (const json::value* c = args->find("clock"); c && c->is_string() && c->as_string() == "gpu_events")
        s.clock = clock_source::gpu_events;
    }
    if (phase == "B") open[key].push_back(t.spans.size());
    t.spans.push_back(std::move(s));
  }
  // Duration events still open when the trace ends (cut while they ran) last to its end, as viewers draw them.
  std::int64_t trace_end = t.origin_ns;
  for (const span& s : t.spans) trace_end = std::max(trace_end, s.end_ns);
  for (const auto& [key, stack] : open)
    for (std::size_t index : stack) t.spans[index].end_ns = trace_end;

  for (auto& [key, info] : named) {
    if (info.lane.kind == lane_kind::host_thread && info.lane.id == 0) {
      auto it = foreign.find(key);
      if (it == foreign.end()) continue;  // a named thread without events
      info.lane = it->second;
    }
    t.lanes.push_back(std::move(info));
  }
  for (const auto& [key, l] : foreign)
    if (!named.count(key))
      t.lanes.push_back({l, "pid " + ids.name(key.first) + " tid " + ids.name(key.second)});
  if (skipped_events) *skipped_events = skipped;
  t.normalize();
  return t;
}

}  // namespace cuasync::trace
