// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The HTML page: self-contained, its data (one lane per stream, copy direction and thread; the spans as columns that
// decode to the timeline's times), escaped text, one window figure, legend, summary, findings and their places.
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/json.hpp>

#include "span_builder.hpp"
#include "synthetic_pipeline.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

namespace trace = cuasync::trace;
namespace json = cuasync::trace::json;

namespace {
std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
// The page's embedded data (the viewer's input), parsed.
json::value page_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"tl-data\">";
  const auto begin = page.find(open);
  REQUIRE(begin != std::string::npos);
  const auto end = page.find("</script>", begin);
  REQUIRE(end != std::string::npos);
  return json::parse(std::string_view(page).substr(begin + open.size(), end - begin - open.size()));
}
// The page before its scripts: what a reader sees as text.
std::string text_part(const std::string& page) { return page.substr(0, page.find("<script")); }
}  // namespace

TEST_CASE("the HTML page references nothing outside itself", "[trace][html]") {
  const std::string page = lower(trace::to_html(trace::test::pipeline_timeline()));
  for (const char* external : {"http", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe", "<svg"}) {
    INFO(external);
    CHECK(page.find(external) == std::string::npos);
  }
  CHECK(page.starts_with("<!doctype html>"));
  CHECK(page.find("<canvas id=\"tl-canvas\"") != std::string::npos);
  // Two inline scripts, the data and the viewer; nothing else ends a script element.
  CHECK(count(page, "<script") == 2);
  CHECK(count(page, "</script>") == 2);
}

TEST_CASE("the HTML page's data has one lane per stream, copy direction and host thread, in columns", "[trace][html]") {
  const trace::timeline t = trace::test::pipeline_timeline();
  const json::value data = page_data(trace::to_html(t));
  const json::array& lanes = data.find("lanes")->as_array();
  REQUIRE(lanes.size() == 7);
  const char* names[] = {"H2D (GPU 0)", "D2H (GPU 0)", "stream 11 (GPU 0)", "stream 12 (GPU 0)", "stream 13 (GPU 0)",
                         "io thread", "postprocess thread"};
  const int kinds[] = {1, 1, 0, 0, 0, 2, 2};
  const json::array& strings = data.find("strings")->as_array();
  std::size_t spans = 0;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    INFO(names[i]);
    CHECK(lanes[i].find("name")->as_string() == names[i]);
    CHECK(lanes[i].find("kind")->as_number() == kinds[i]);
    CHECK(lanes[i].find("group")->as_string() == (i < 5 ? "GPU 0" : "host"));
    const std::size_t n = lanes[i].find("b")->as_array().size();
    for (const char* column : {"d", "n", "l", "c", "y"}) CHECK(lanes[i].find(column)->as_array().size() == n);
    spans += n;
  }
  CHECK(spans == t.spans.size());

  // Stream 11's spans decode to the timeline's: begins as deltas from the first span, names from the string table.
  const std::int64_t t0 = t.first_begin_ns();
  std::vector<const trace::span*> kernels;
  for (const trace::span& s : t.spans)
    if (s.lane == trace::lane::stream(0, trace::test::pipeline_first_stream_id)) kernels.push_back(&s);
  const json::value& lane = lanes[2];
  REQUIRE(lane.find("b")->as_array().size() == kernels.size());
  std::int64_t at = 0;
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    at += static_cast<std::int64_t>(lane.find("b")->as_array()[k].as_number());
    CHECK(at == kernels[k]->begin_ns - t0);
    CHECK(lane.find("d")->as_array()[k].as_number() == static_cast<double>(kernels[k]->duration_ns()));
    const auto name = static_cast<std::size_t>(lane.find("n")->as_array()[k].as_number());
    CHECK(strings.at(name).as_string() == "scale_add");
    CHECK(lane.find("c")->as_array()[k].as_number() == static_cast<int>(trace::category::launch));
  }
  CHECK(data.find("window")->as_number() == static_cast<double>(t.last_end_ns() - t0));
  CHECK(data.find("shift")->as_number() == static_cast<double>(t0 - t.origin_ns));
  CHECK(data.find("categories")->as_array()[0].find("colour")->as_string() ==
        trace::category_colour(trace::category::launch));
  CHECK(data.find("markers")->as_array()[0].as_string() == trace::lane_marker_colour(trace::lane_kind::stream));
}

TEST_CASE("the HTML page has a legend, the overlap summary and one window figure", "[trace][html]") {
  const std::string page = trace::to_html(trace::test::pipeline_timeline());
  for (const char* c : {">launch<", ">copy<", ">pipeline_stage<", ">jit_cache_hit<"}) CHECK(page.find(c) != std::string::npos);
  CHECK(page.find(">memset<") == std::string::npos);
  CHECK(page.find("Overlap summary") != std::string::npos);
  CHECK(page.find("compute (critical)") != std::string::npos);
  CHECK(page.find("dropped") == std::string::npos);
  // The page's span of time (8.800 ms, host spans included) and the summary's window (7.600 ms, copies and
  // kernels only) are different figures: only the second is called a window, and always the GPU window.
  const std::string text = text_part(page);
  CHECK(text.find("8.800 ms from the first span's begin to the last one's end") != std::string::npos);
  CHECK(text.find("GPU window 7.600 ms") != std::string::npos);
  CHECK(count(lower(text), "window") == count(text, "GPU window"));
}

TEST_CASE("names and labels are escaped in the HTML page, and a dropped count is shown", "[trace][html]") {
  trace::timeline t;
  trace::span s;
  s.lane = trace::lane::stream(0, 1);
  s.category = trace::category::launch;
  s.begin_ns = 0;
  s.end_ns = 1000;
  s.name = "k<float></script><script>alert(1)";
  s.label = "a & b \"c\" 'd'";
  t.spans.push_back(s);
  t.lanes.push_back({s.lane, "<b>bold</b>"});
  t.dropped = 5;
  const std::string page = trace::to_html(t);
  CHECK(count(page, "</script>") == 2);
  CHECK(page.find("<b>") == std::string::npos);
  CHECK(page.find("5 records were dropped") != std::string::npos);
  // The data reads back as the names were.
  const json::value data = page_data(page);
  CHECK(data.find("lanes")->as_array()[0].find("name")->as_string() == "<b>bold</b>");
  const json::array& strings = data.find("strings")->as_array();
  CHECK(std::any_of(strings.begin(), strings.end(), [&](const json::value& v) { return v.as_string() == s.name; }));
  CHECK(std::any_of(strings.begin(), strings.end(), [&](const json::value& v) { return v.as_string() == s.label; }));
}

TEST_CASE("an empty timeline renders, and a large one costs about 25 bytes of page per span", "[trace][html]") {
  const std::string empty = trace::to_html(trace::timeline{});
  CHECK(empty.find("0 spans on 0 lanes") != std::string::npos);
  CHECK(empty.find("No copies or kernels") != std::string::npos);
  CHECK(page_data(empty).find("lanes")->as_array().empty());

  const trace::timeline big = trace::test::scaled_pipeline_timeline(5, 2'500);  // 100,000 spans
  REQUIRE(big.spans.size() == 100'000);
  const std::string page = trace::to_html(big);
  const double per_span = static_cast<double>(page.size()) / static_cast<double>(big.spans.size());
  INFO("page bytes per span: " << per_span);
  CHECK(per_span < 30);
  CHECK(per_span > 5);
}

TEST_CASE("the HTML page lists the findings after the summary, without Markdown, and marks their places",
          "[trace][html]") {
  const std::string clean = trace::to_html(trace::test::pipeline_timeline());
  CHECK(clean.find("Diagnostics</h2>\n<p>No findings: none of the 11 checks fired.</p>") != std::string::npos);
  CHECK(page_data(clean).find("findings")->as_array().empty());

  trace::test::span_builder b;
  b.copy(trace::lane_kind::copy_h2d, 3, 0, 1, 64, trace::flag::pageable_host).name = "copy<script>";
  b.copy(trace::lane_kind::copy_h2d, 3, 5, 7, 64, trace::flag::pageable_host);
  const std::string page = trace::to_html(b.t);
  const auto summary = page.find("Overlap summary"), diagnostics = page.find("Diagnostics</h2>");
  REQUIRE(diagnostics != std::string::npos);
  CHECK(summary < diagnostics);
  CHECK(page.find("<div class=\"finding\" id=\"finding-1\">", diagnostics) != std::string::npos);
  CHECK(page.find("<strong>1. pageable_copy</strong>: 2 asynchronous copies", diagnostics) != std::string::npos);
  CHECK(page.find("<li>copy&lt;script&gt; on H2D (GPU 0) (stream 3)", diagnostics) != std::string::npos);
  CHECK(page.find("Fix: Copy from and to pinned memory", diagnostics) != std::string::npos);
  // `code` in the texts is set as code, no backtick is left.
  const std::string text = text_part(page);
  CHECK(text.find("<code>pinned_buffer</code>") != std::string::npos);
  CHECK(text.find('`') == std::string::npos);
  CHECK(text.find("2 places). <button type=\"button\" data-finding=\"0\">") != std::string::npos);
  CHECK(count(page, "<script") == 2);

  // The places: lane 0 (H2D), times from the first span.
  const json::value data = page_data(page);
  const json::array& findings = data.find("findings")->as_array();
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].find("id")->as_string() == "pageable_copy");
  const json::array& places = findings[0].find("places")->as_array();
  REQUIRE(places.size() == 6);
  CHECK(places[0].as_number() == 0);
  CHECK(places[1].as_number() == 0);
  CHECK(places[2].as_number() == 1'000);
  CHECK(places[4].as_number() == 5'000);
  CHECK(places[5].as_number() == 7'000);
}
