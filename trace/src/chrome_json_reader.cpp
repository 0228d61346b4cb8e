// Reads Chrome trace event JSON back into a timeline: cuasync's own files exactly (lanes from the events' args),
// other producers' complete events as thread lanes.
#include <cuasync/trace/chrome_json.hpp>

#include <cuasync/trace/json.hpp>

#include <cmath>
#include <map>
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
  if (!k) bad_event(index, "unknown lane kind \"" + kind->as_string() + "\"");
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

}  // namespace

timeline read_chrome_json(std::string_view text, std::size_t* skipped_events) {
  const json::value root = json::parse(text);
  const json::value* events = root.is_array() ? &root : root.find("traceEvents");
  if (!events || !events->is_array()) throw std::runtime_error("not a Chrome trace: no \"traceEvents\" array");

  timeline t;
  if (const json::value* other = root.find("otherData")) {
    if (const json::value* origin = other->find("origin_ns"))
      t.origin_ns = whole(*origin, 0, "otherData.origin_ns", -max_origin_ns, max_origin_ns);
    if (const json::value* dropped = other->find("dropped_records")) t.dropped = count(*dropped, 0, "dropped_records");
    if (const json::value* devices = other->find("devices")) t.devices = devices_of(*devices);
  }

  std::map<thread_key, lane_info> named;  // from thread_name metadata
  std::map<thread_key, lane> foreign;     // (pid, tid) of events without lane args, as thread lanes
  std::size_t skipped = 0;
  const json::array& list = events->as_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json::value& e = list[i];
    if (!e.is_object()) bad_event(i, "not an object");
    const json::value& ph = required(e, "ph", i);
    if (!ph.is_string()) bad_event(i, "\"ph\" is not a string");
    const json::value* pid = e.find("pid");
    const json::value* tid = e.find("tid");
    const thread_key key{pid ? whole(*pid, i, "pid", -max_count, max_count) : 0,
                         tid ? whole(*tid, i, "tid", -max_count, max_count) : 0};
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
    if (ph.as_string() != "X") {
      ++skipped;
      continue;
    }

    span s;
    const json::value& name = required(e, "name", i);
    if (!name.is_string()) bad_event(i, "\"name\" is not a string");
    s.name = name.as_string();
    if (const json::value* cat = e.find("cat"); cat && cat->is_string())
      s.category = category_from_string(cat->as_string()).value_or(category::user);
    s.begin_ns = t.origin_ns + nanoseconds(required(e, "ts", i), i, "ts");
    const std::int64_t dur = e.find("dur") ? nanoseconds(*e.find("dur"), i, "dur") : 0;
    if (dur < 0) bad_event(i, "negative \"dur\"");
    s.end_ns = s.begin_ns + dur;

    if (auto l = lane_from_args(args, i)) {
      s.lane = *l;
    } else if (auto it = named.find(key); it != named.end() && it->second.lane.id != 0) {
      s.lane = it->second.lane;
    } else {
      // Another producer's thread: a lane of its own, numbered in order of appearance.
      auto [f, added] = foreign.try_emplace(key, lane::host_thread(foreign.size() + 1));
      s.lane = f->second;
    }
    if (args && args->is_object()) {
      if (const json::value* b = args->find("bytes")) s.bytes = count(*b, i, "bytes");
      if (const json::value* st = args->find("stream")) s.stream_id = count(*st, i, "stream");
      if (const json::value* a = args->find("src")) s.src = address(*a, i, "src");
      if (const json::value* a = args->find("dst")) s.dst = address(*a, i, "dst");
      if (const json::value* f = args->find("flags")) s.flags = flags_of(*f, i);
      if (const json::value* l = args->find("label"); l && l->is_string()) s.label = l->as_string();
      if (const json::value* c = args->find("clock"); c && c->is_string() && c->as_string() == "gpu_events")
        s.clock = clock_source::gpu_events;
    }
    t.spans.push_back(std::move(s));
  }

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
      t.lanes.push_back({l, "pid " + std::to_string(key.first) + " tid " + std::to_string(key.second)});
  if (skipped_events) *skipped_events = skipped;
  t.normalize();
  return t;
}

}  // namespace cuasync::trace
