// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The HTML page around the timeline: title and counts, the category legend, the canvas and its viewer, the overlap
// summary table, the diagnostics' findings. Inline CSS and script with generic font families only: nothing is
// fetched when the page opens.
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
h2 { font-size: 15px; }
p.counts { margin: 0 0 10px 0; color: #555; }
p.warning { color: #b00020; font-weight: bold; }
.legend { margin: 8px 0 10px 0; }
.legend span.k { display: inline-block; margin-right: 14px; }
.legend span.c { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin-right: 4px; }
table { border-collapse: collapse; margin-top: 6px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
div.finding { margin: 10px 0 14px 0; padding: 6px 10px; border-left: 4px solid #b00020; background: #fbf4f4; }
div.finding p { margin: 4px 0; }
div.finding code { font-size: 12px; background: #f0e4e4; padding: 0 2px; }
div.finding ul { margin: 4px 0; padding-left: 20px; color: #555; }
div.finding button { font: 12px sans-serif; }
)";

std::string summary_table(const overlap_summary& s) {
  using detail::html_escape;
  if (s.critical == stage::none)
    return "<p>No copies or kernels in this trace: nothing on H2D or D2H lanes, no launch spans on stream lanes.</p>\n";
  std::string out = "<table>\n<tr><th>stage</th><th>spans</th><th>busy</th><th>of the GPU window</th><th>overlapped with "
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
  // Not the page's span of time (first to last span of any lane, host ones included): named apart so that the
  // two figures cannot be taken for one another.
  out += "<p>GPU window " + html_escape(format_duration(s.window_ns())) +
         " (from the first copy or kernel to the end of the last: the table's percentages are of it); at least one "
         "stage busy " +
         html_escape(format_duration(s.any_busy_ns)) + ", all idle " + html_escape(format_duration(s.idle_ns())) +
         ". At once: H2D + compute " + html_escape(format_duration(s.h2d_with_compute_ns)) + ", D2H + compute " +
         html_escape(format_duration(s.d2h_with_compute_ns)) + ", H2D + D2H " +
         html_escape(format_duration(s.h2d_with_d2h_ns)) + ", all three " +
         html_escape(format_duration(s.all_three_ns)) + ". Overlap factor " + factor +
         " (1: the stages ran one after another).</p>\n";
  return out;
}

// The findings, each with its explanation, fix and examples.
// The findings, each with its explanation, fix and examples, numbered as their markers on the lanes are; the
// button zooms the timeline to the finding's first place (the viewer wires it up by the data-finding attribute).
std::string findings_section(const std::vector<finding>& findings) {
  using detail::html_escape;
  using detail::html_with_code;
  if (findings.empty())
    return "<p>No findings: none of the " + std::to_string(diagnostic_count) + " checks fired.</p>\n";
  std::string out;
  for (std::size_t k = 0; k < findings.size(); ++k) {
    const finding& f = findings[k];
    const std::string n = std::to_string(k + 1);
    out += "<div class=\"finding\" id=\"finding-" + n + "\">\n<p><strong>" + n + ". " +
           std::string(to_string(f.kind)) + "</strong>: " + html_with_code(f.summary) + "</p>\n<p>Why: " +
           html_with_code(f.explanation) + "</p>\n<p>Fix: " + html_with_code(f.fix) + "</p>\n";
    if (!f.examples.empty()) {
      out += "<ul>";
      for (const std::string& e : f.examples) out += "<li>" + html_with_code(e) + "</li>";
      out += "</ul>\n";
    }
    if (!f.places.empty())
      out += "<p>Marked on the timeline's lanes in red (" + std::to_string(f.places.size()) +
             (f.places.size() == 1 ? " place" : " places") + "). <button type=\"button\" data-finding=\"" +
             std::to_string(k) + "\">show the first</button></p>\n";
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
  const std::vector<finding> findings = diagnose(t);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<title>cuasync timeline</title>\n<style>";
  out += style;
  out += detail::viewer_style;
  out += "</style>\n</head>\n<body>\n<h1>cuasync timeline</h1>\n";
  out += "<p class=\"counts\">" + std::to_string(t.spans.size()) + " spans on " + std::to_string(t.lanes.size()) +
         " lanes, " + html_escape(format_duration(t.last_end_ns() - t.first_begin_ns())) +
         " from the first span's begin to the last one's end (host spans included); times from the start of "
         "recording.</p>\n";
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
  if (!findings.empty())
    out += "<span class=\"k\"><span class=\"c\" style=\"background:" + std::string(finding_marker_colour) +
           "\"></span>a diagnostic's finding (numbered as below)</span>";
  out += "</div>\n";

  out += "<div class=\"tl-bar\"><button type=\"button\" id=\"tl-out\" title=\"zoom out (-)\">&minus;</button>"
         "<button type=\"button\" id=\"tl-in\" title=\"zoom in (+)\">+</button>"
         "<button type=\"button\" id=\"tl-reset\" title=\"show everything (0)\">reset</button> "
         "<span id=\"tl-view\"></span> <span class=\"tl-hint\">Wheel or pinch: zoom at the pointer; drag: pan; "
         "keys + &minus; &larr; &rarr; 0. Spans narrower than a pixel are shaded by how busy their pixel column is. "
         "Hover for details.</span></div>\n";
  out += "<div id=\"tl\"><canvas id=\"tl-canvas\" tabindex=\"0\"></canvas><div id=\"tl-tip\"></div></div>\n";
  out += "<noscript><p class=\"warning\">The timeline is drawn by the page's own inline script: allow scripts to "
         "see it.</p></noscript>\n";
  out += "<h2>Overlap summary</h2>\n" + summary_table(summarize(t));
  out += "<h2>Diagnostics</h2>\n" + findings_section(findings);
  // Last, so that the findings' buttons exist when the viewer wires them up; it draws before the load event.
  out += "<script type=\"application/json\" id=\"tl-data\">" + detail::timeline_data(t, findings) + "</script>\n";
  out += "<script>";
  out += detail::viewer_script;
  out += detail::viewer_script_input;
  out += "</script>\n";
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

std::string html_with_code(std::string_view text) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t open = text.find('`', at);
    const std::size_t close = open == std::string_view::npos ? open : text.find('`', open + 1);
    if (close == std::string_view::npos) {
      out += html_escape(text.substr(at));
      break;
    }
    out += html_escape(text.substr(at, open - at)) + "<code>" + html_escape(text.substr(open + 1, close - open - 1)) +
           "</code>";
    at = close + 1;
  }
  return out;
}
}  // namespace detail

}  // namespace cuasync::trace
