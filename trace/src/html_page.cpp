// The HTML page around the SVG timeline: title and counts, the category legend, the overlap summary table, the
// diagnostics' findings. Inline
// CSS with generic font families only: nothing is fetched when the page opens.
#include "html_parts.hpp"

#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/overlap.hpp>

#include <array>
#include <cstdio>
#include <ostream>

namespace cuasync::trace {
namespace {

// Tableau 10, in category order; none of them is a lane marker's colour.
constexpr std::array<std::string_view, category_count> colours = {
    "#4e79a7",  // launch
    "#f28e2b",  // copy
    "#edc948",  // memset
    "#e15759",  // alloc
    "#ff9da7",  // staged_copy_chunk
    "#59a14f",  // pipeline_stage
    "#76b7b2",  // await
    "#b07aa1",  // jit_compile
    "#d4a6c8",  // jit_cache_hit
    "#9c755f",  // sync
    "#d37295",  // collective
    "#a0cbe8",  // module_load
    "#bab0ac",  // user
};

constexpr std::string_view style = R"(
body { margin: 16px 20px; font: 13px sans-serif; color: #222; background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px 0; }
p.counts { margin: 0 0 10px 0; color: #555; }
p.warning { color: #b00020; font-weight: bold; }
svg.timeline { display: block; shape-rendering: crispEdges; }
svg text { font: 12px sans-serif; fill: #222; }
svg text.g { font-weight: bold; }
svg text.t { font-size: 11px; fill: #555; text-anchor: middle; }
svg line.grid { stroke: #d0d4da; stroke-width: 1; }
.legend { margin: 8px 0 14px 0; }
.legend span.k { display: inline-block; margin-right: 14px; }
.legend span.c { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px; }
table { border-collapse: collapse; margin-top: 6px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
div.finding { margin: 10px 0 14px 0; padding: 6px 10px; border-left: 4px solid #b00020; background: #fbf4f4; }
div.finding p { margin: 4px 0; }
div.finding code { font-size: 12px; }
div.finding ul { margin: 4px 0; padding-left: 20px; color: #555; }
)";


std::string summary_table(const overlap_summary& s) {
  using detail::html_escape;
  if (s.critical == stage::none)
    return "<p>No copies or kernels in this trace: nothing on H2D or D2H lanes, no launch spans on stream lanes.</p>\n";
  std::string out = "<table>\n<tr><th>stage</th><th>spans</th><th>busy</th><th>of the window</th><th>overlapped with "
                    "another stage</th><th>of busy</th><th>exclusive</th></tr>\n";
  for (stage st : {stage::h2d, stage::compute, stage::d2h}) {
    const stage_time& t = s.time_of(st);
    out += "<tr><td>" + std::string(to_string(st)) + (st == s.critical ? " (critical)" : "") + "</td><td>" +
           std::to_string(t.spans) + "</td><td>" + html_escape(format_duration(t.busy_ns)) + "</td><td>" +
           format_percent(t.busy_ns, s.window_ns()) + "</td><td>" + html_escape(format_duration(t.overlapped_ns)) +
           "</td><td>" + format_percent(t.overlapped_ns, t.busy_ns) + "</td><td>" +
           html_escape(format_duration(t.exclusive_ns())) + "</td></tr>\n";
  }
  out += "</table>\n";
  char factor[32];
  std::snprintf(factor, sizeof factor, "%.2f", s.overlap_factor());
  out += "<p>Window " + html_escape(format_duration(s.window_ns())) + "; at least one stage busy " +
         html_escape(format_duration(s.any_busy_ns)) + ", all idle " + html_escape(format_duration(s.idle_ns())) +
         ". At once: H2D + compute " + html_escape(format_duration(s.h2d_with_compute_ns)) + ", D2H + compute " +
         html_escape(format_duration(s.d2h_with_compute_ns)) + ", H2D + D2H " +
         html_escape(format_duration(s.h2d_with_d2h_ns)) + ", all three " +
         html_escape(format_duration(s.all_three_ns)) + ". Overlap factor " + factor +
         " (1: the stages ran one after another).</p>\n";
  return out;
}

// The findings, each with its explanation, fix and examples.
std::string findings_section(const std::vector<finding>& findings) {
  using detail::html_escape;
  if (findings.empty())
    return "<p>No findings: none of the " + std::to_string(diagnostic_count) + " checks fired.</p>\n";
  std::string out;
  for (const finding& f : findings) {
    out += "<div class=\"finding\">\n<p><strong>" + std::string(to_string(f.kind)) + "</strong>: " +
           html_escape(f.summary) + "</p>\n<p>Why: " + html_escape(f.explanation) + "</p>\n<p>Fix: " + html_escape(f.fix) + "</p>\n";
    if (!f.examples.empty()) {
      out += "<ul>";
      for (const std::string& e : f.examples) out += "<li>" + html_escape(e) + "</li>";
      out += "</ul>\n";
    }
    out += "</div>\n";
  }
  return out;
}

}  // namespace

std::string_view category_colour(category c) noexcept {
  const auto i = static_cast<std::size_t>(c);
  return i < colours.size() ? colours[i] : colours.back();
}

std::string_view lane_marker_colour(lane_kind k) noexcept {
  if (k == lane_kind::stream) return "#005ac8";
  if (k == lane_kind::host_thread) return "#6b2fa0";
  return "#c85a00";
}

std::string to_html(const timeline& input) {
  using detail::html_escape;
  timeline t = input;
  t.normalize();
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<title>cuasync timeline</title>\n<style>";
  out += style;
  out += "</style>\n</head>\n<body>\n<h1>cuasync timeline</h1>\n";
  out += "<p class=\"counts\">" + std::to_string(t.spans.size()) + " spans on " + std::to_string(t.lanes.size()) +
         " lanes, window " + html_escape(format_duration(t.last_end_ns() - t.first_begin_ns())) +
         ". Hover a span for its name, category, duration, label and bytes.</p>\n";
  if (t.dropped)
    out += "<p class=\"warning\">" + std::to_string(t.dropped) +
           " records were dropped at the recorder's cap: this timeline is incomplete.</p>\n";

  out += "<div class=\"legend\">";
  std::array<bool, category_count> present{};
  for (const span& s : t.spans) present[static_cast<std::size_t>(s.category)] = true;
  for (int c = 0; c < category_count; ++c)
    if (present[static_cast<std::size_t>(c)])
      out += "<span class=\"k\"><span class=\"c\" style=\"background:" +
             std::string(category_colour(static_cast<category>(c))) + "\"></span>" +
             std::string(to_string(static_cast<category>(c))) + "</span>";
  out += "</div>\n";

  out += detail::timeline_svg(t);
  out += "<h2 style=\"font-size:15px\">Overlap summary</h2>\n" + summary_table(summarize(t));
  out += "<h2 style=\"font-size:15px\">Diagnostics</h2>\n" + findings_section(diagnose(t));
  out += "</body>\n</html>\n";
  return out;
}

void write_html(const timeline& t, std::ostream& out) { out << to_html(t); }

namespace detail {
std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace detail

}  // namespace cuasync::trace
