// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Normalizing a timeline: sorted spans, one named lane_info per lane in lane order.
#include <cuasync/trace/timeline.hpp>

#include <algorithm>

namespace cuasync::trace {

std::string timeline::lane_name(const lane& l) const {
  for (const lane_info& info : lanes)
    if (info.lane == l) return info.name;
  return default_lane_name(l);
}

void timeline::normalize() {
  // Stable: spans that begin together on one lane keep their recording order (a nested host scope records first).
  std::stable_sort(spans.begin(), spans.end(), [](const span& a, const span& b) {
    if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
    return a.lane < b.lane;
  });
  std::vector<lane> used;
  for (const span& s : spans) used.push_back(s.lane);
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (const lane& l : used)
    if (std::none_of(lanes.begin(), lanes.end(), [&](const lane_info& info) { return info.lane == l; }))
      lanes.push_back({l, default_lane_name(l)});
  std::stable_sort(lanes.begin(), lanes.end(), [](const lane_info& a, const lane_info& b) { return a.lane < b.lane; });
  lanes.erase(std::unique(lanes.begin(), lanes.end(),
                          [](const lane_info& a, const lane_info& b) { return a.lane == b.lane; }),
              lanes.end());
}

const device_info* timeline::device(int ordinal) const noexcept {
  for (const device_info& d : devices)
    if (d.device == ordinal) return &d;
  return nullptr;
}

std::int64_t timeline::first_begin_ns() const noexcept {
  if (spans.empty()) return 0;
  std::int64_t first = spans.front().begin_ns;
  for (const span& s : spans) first = std::min(first, s.begin_ns);
  return first;
}

std::int64_t timeline::last_end_ns() const noexcept {
  if (spans.empty()) return 0;
  std::int64_t last = spans.front().end_ns;
  for (const span& s : spans) last = std::max(last, s.end_ns);
  return last;
}

}  // namespace cuasync::trace
