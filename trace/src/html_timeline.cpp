// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The timeline's data for the page's viewer, as compact as plain JSON allows: one string table for names and
// labels, and per lane its spans as parallel arrays of small integers (the begin as the delta from the lane's
// previous begin, the duration, indexes into the string table, the category, the bytes), not one object per span.
// About 25 bytes of page per span: a million spans make a page of about 24 MB.
#include "html_parts.hpp"

#include <cuasync/trace/html.hpp>
#include <cuasync/trace/json.hpp>

#include <algorithm>
#include <unordered_map>

namespace cuasync::trace::detail {
namespace {

// Indexes of distinct strings; "" is 0.
class string_table {
 public:
  string_table() { index_of(""); }
  std::int64_t index_of(const std::string& s) {
    auto [it, added] = ids_.try_emplace(s, static_cast<std::int64_t>(strings_.size()));
    if (added) strings_.push_back(&it->first);
    return it->second;
  }
  void write(json::writer& w) const {
    w.begin_array();
    for (const std::string* s : strings_) w.value(*s);
    w.end_array();
  }

 private:
  std::unordered_map<std::string, std::int64_t> ids_;
  std::vector<const std::string*> strings_;  // node-based map: the keys stay put
};

std::size_t lane_index(const timeline& t, const lane& l) {
  const auto it = std::lower_bound(t.lanes.begin(), t.lanes.end(), l,
                                   [](const lane_info& info, const lane& x) { return info.lane < x; });
  return it != t.lanes.end() && it->lane == l ? static_cast<std::size_t>(it - t.lanes.begin()) : t.lanes.size();
}

int kind_code(lane_kind k) { return k == lane_kind::stream ? 0 : k == lane_kind::host_thread ? 2 : 1; }

}  // namespace

std::string timeline_data(const timeline& t, const std::vector<finding>& findings) {
  const std::int64_t t0 = t.first_begin_ns();
  std::vector<std::vector<const span*>> by_lane(t.lanes.size());
  for (const span& s : t.spans)
    if (const std::size_t i = lane_index(t, s.lane); i < t.lanes.size()) by_lane[i].push_back(&s);

  string_table strings;
  json::writer w;
  w.begin_object();
  // Times in the arrays are ns from t0 (the first span's begin); the axis shows them from the origin.
  w.member("window", t.last_end_ns() - t0).member("shift", t0 - t.origin_ns);
  w.key("categories").begin_array();
  for (int c = 0; c < category_count; ++c) {
    w.begin_object().member("name", to_string(static_cast<category>(c)));
    w.member("colour", category_colour(static_cast<category>(c))).end_object();
  }
  w.end_array();
  w.key("markers").begin_array();
  for (lane_kind k : {lane_kind::stream, lane_kind::copy_h2d, lane_kind::host_thread}) w.value(lane_marker_colour(k));
  w.end_array();
  w.member("finding_colour", finding_marker_colour);

  w.key("lanes").begin_array();
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    const lane& l = t.lanes[i].lane;
    w.newline().begin_object().member("name", t.lanes[i].name).member("kind", kind_code(l.kind));
    w.member("group", l.kind == lane_kind::host_thread ? std::string("host") : "GPU " + std::to_string(l.device));
    const auto column = [&](const char* key, auto&& value_of) {
      w.key(key).begin_array();
      for (const span* s : by_lane[i]) w.value(value_of(*s));
      w.end_array();
    };
    std::int64_t previous = 0;
    column("b", [&](const span& s) {
      const std::int64_t delta = s.begin_ns - t0 - previous;
      previous = s.begin_ns - t0;
      return delta;
    });
    column("d", [](const span& s) { return s.duration_ns(); });
    column("n", [&](const span& s) { return strings.index_of(s.name); });
    column("l", [&](const span& s) { return strings.index_of(s.label); });
    column("c", [](const span& s) { return static_cast<std::int64_t>(s.category); });
    column("y", [](const span& s) { return static_cast<std::uint64_t>(s.bytes); });
    w.end_object();
  }
  w.end_array();

  w.newline().key("findings").begin_array();
  for (std::size_t k = 0; k < findings.size(); ++k) {
    const finding& f = findings[k];
    w.begin_object().member("id", to_string(f.kind)).member("summary", f.summary);
    w.key("places").begin_array();
    for (const finding_place& p : f.places)
      if (const std::size_t i = lane_index(t, p.lane); i < t.lanes.size())
        w.value(static_cast<std::uint64_t>(i)).value(p.begin_ns - t0).value(p.end_ns - t0);
    w.end_array().end_object();
  }
  w.end_array();
  w.newline().key("strings");
  strings.write(w);
  w.end_object();

  // '<' only occurs in strings, where \u003c reads the same: no "</script>" can end the element early.
  std::string text = w.take(), out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

}  // namespace cuasync::trace::detail
