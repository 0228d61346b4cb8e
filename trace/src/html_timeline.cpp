// The SVG timeline of the HTML page: a time axis, then per process a header and its lanes, each with a marker of its
// kind, its name and its spans.
#include "html_parts.hpp"

#include <cuasync/trace/html.hpp>
#include <cuasync/trace/overlap.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace cuasync::trace::detail {
namespace {

constexpr int label_width = 210;          // lane names, left of the plot
constexpr int plot_left = label_width + 10;
constexpr int plot_right = svg_width - 20;
constexpr int axis_height = 30;
constexpr int header_height = 24;          // "GPU 0", "host"
constexpr int lane_height = 24;
constexpr int lane_gap = 4;
constexpr int marker_width = 10;
constexpr int max_depth = 3;               // nested host spans drawn inset, at most this deep

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Axis steps of 1, 2 or 5 times a power of ten, about ten ticks over the window.
std::int64_t tick_step(std::int64_t window) {
  const double raw = static_cast<double>(window) / 10.0;
  const double power = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  for (double m : {1.0, 2.0, 5.0})
    if (power * m >= raw) return std::max<std::int64_t>(1, std::llround(power * m));
  return std::max<std::int64_t>(1, std::llround(power * 10));
}

std::string tick_label(std::int64_t ns, std::int64_t step) {
  const char* unit = "ns";
  double scale = 1;
  if (step >= 1'000'000'000) unit = "s", scale = 1e9;
  else if (step >= 1'000'000) unit = "ms", scale = 1e6;
  else if (step >= 1'000) unit = "µs", scale = 1e3;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %s", static_cast<double>(ns) / scale, unit);
  return buf;
}

std::string tooltip(const span& s, std::size_t merged) {
  std::string text = s.name.empty() ? std::string(to_string(s.category)) : s.name;
  if (merged > 1) text = std::to_string(merged) + " spans from " + text + " (merged at this scale)";
  text += " · " + std::string(to_string(s.category)) + " · " + format_duration(s.duration_ns());
  if (!s.label.empty()) text += " · " + s.label;
  if (s.bytes) text += " · " + std::to_string(s.bytes) + " bytes";
  if (s.clock == clock_source::gpu_events) text += " · GPU timed";
  return text;
}

// A span's rectangle, kept back while following spans of the same lane, depth and category continue it within
// half a pixel (so a million sub-pixel spans do not become a million rectangles).
struct pending_rect {
  double x0 = 0, x1 = 0;
  int y = 0, height = 0;
  const span* first = nullptr;
  std::size_t count = 0;
};

void emit(std::string& out, pending_rect& r) {
  if (!r.first) return;
  out += "<rect class=\"s\" x=\"" + fmt(r.x0) + "\" y=\"" + std::to_string(r.y) + "\" width=\"" +
         fmt(std::max(r.x1 - r.x0, 1.0)) + "\" height=\"" + std::to_string(r.height) + "\" fill=\"" +
         std::string(category_colour(r.first->category)) + "\"><title>" + html_escape(tooltip(*r.first, r.count)) +
         "</title></rect>\n";
  r = {};
}

}  // namespace

std::string timeline_svg(const timeline& t) {
  const std::int64_t t0 = t.first_begin_ns();
  const std::int64_t window = std::max<std::int64_t>(t.last_end_ns() - t0, 1);
  const double px_per_ns = static_cast<double>(plot_right - plot_left) / static_cast<double>(window);
  auto x_of = [&](std::int64_t ns) { return plot_left + static_cast<double>(ns - t0) * px_per_ns; };

  // Rows: a header for each process (GPU n, host), then its lanes.
  std::vector<int> lane_y(t.lanes.size());
  int y = axis_height;
  std::string body;
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    const lane& l = t.lanes[i].lane;
    if (i == 0 || (l.kind == lane_kind::host_thread) != (t.lanes[i - 1].lane.kind == lane_kind::host_thread) ||
        l.device != t.lanes[i - 1].lane.device) {
      const std::string group = l.kind == lane_kind::host_thread ? "host" : "GPU " + std::to_string(l.device);
      body += "<text class=\"g\" x=\"" + std::to_string(marker_width + 6) + "\" y=\"" + std::to_string(y + 17) +
              "\">" + html_escape(group) + "</text>\n";
      y += header_height;
    }
    lane_y[i] = y;
    body += "<rect x=\"0\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(svg_width) + "\" height=\"" +
            std::to_string(lane_height) + "\" fill=\"" + (i % 2 ? "#eceef2" : "#f6f7f9") + "\"/>\n";
    body += "<rect x=\"0\" y=\"" + std::to_string(y) + "\" width=\"" + std::to_string(marker_width) + "\" height=\"" +
            std::to_string(lane_height) + "\" fill=\"" + std::string(lane_marker_colour(l.kind)) + "\"/>\n";
    body += "<text class=\"l\" x=\"" + std::to_string(marker_width + 6) + "\" y=\"" + std::to_string(y + 16) + "\">" +
            html_escape(t.lanes[i].name) + "</text>\n";
    y += lane_height + lane_gap;
  }
  const int height = y + 6;

  // The axis: ticks and faint grid lines over every lane.
  std::string axis;
  const std::int64_t step = tick_step(window);
  for (std::int64_t at = 0; at <= window; at += step) {
    const std::string x = fmt(x_of(t0 + at));
    axis += "<line class=\"grid\" x1=\"" + x + "\" y1=\"" + std::to_string(axis_height - 6) + "\" x2=\"" + x +
            "\" y2=\"" + std::to_string(height) + "\"/>\n";
    axis += "<text class=\"t\" x=\"" + x + "\" y=\"" + std::to_string(axis_height - 10) + "\">" +
            html_escape(tick_label(at, step)) + "</text>\n";
  }

  // Spans, lane by lane (in begin order within a lane), each at its nesting depth on its lane.
  std::vector<std::vector<const span*>> by_lane(t.lanes.size());
  for (const span& s : t.spans) {
    const auto it = std::lower_bound(t.lanes.begin(), t.lanes.end(), s.lane,
                                     [](const lane_info& info, const lane& l) { return info.lane < l; });
    if (it != t.lanes.end() && it->lane == s.lane) by_lane[static_cast<std::size_t>(it - t.lanes.begin())].push_back(&s);
  }
  std::string spans;
  for (std::size_t i = 0; i < t.lanes.size(); ++i) {
    std::vector<std::int64_t> open_ends;  // ends of the spans enclosing the current one
    std::vector<pending_rect> pending(max_depth + 1);
    for (const span* p : by_lane[i]) {
      const span& s = *p;
      while (!open_ends.empty() && open_ends.back() <= s.begin_ns) open_ends.pop_back();
      const int depth = std::min<int>(static_cast<int>(open_ends.size()), max_depth);
      open_ends.push_back(s.end_ns);
      const double x0 = x_of(s.begin_ns), x1 = x_of(s.end_ns);
      pending_rect& r = pending[static_cast<std::size_t>(depth)];
      if (r.first && r.first->category == s.category && x0 <= r.x1 + 0.5 && x1 - x0 < 1.0 && r.x1 - r.x0 < 2.0) {
        r.x1 = std::max(r.x1, x1);
        ++r.count;
        continue;
      }
      emit(spans, r);
      r = {x0, x1, lane_y[i] + 3 + depth * 4, std::max(lane_height - 6 - depth * 8, 4), &s, 1};
    }
    for (pending_rect& r : pending) emit(spans, r);
  }

  return "<svg class=\"timeline\" width=\"" + std::to_string(svg_width) + "\" height=\"" + std::to_string(height) +
         "\" viewBox=\"0 0 " + std::to_string(svg_width) + " " + std::to_string(height) + "\">\n" + body + axis +
         spans + "</svg>\n";
}

}  // namespace cuasync::trace::detail
