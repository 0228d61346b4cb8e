// The HTML page: self-contained, one lane per stream, copy direction and thread, escaped text, legend and summary.
#include <cuasync/trace/html.hpp>

#include "span_builder.hpp"
#include "synthetic_pipeline.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

namespace trace = cuasync::trace;

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
}  // namespace

TEST_CASE("the HTML page references nothing outside itself", "[trace][html]") {
  const std::string page = lower(trace::to_html(trace::test::pipeline_timeline()));
  for (const char* external : {"http", "src=", "<script", "href=", "url(", "@import", "<link", "<img", "<iframe"}) {
    INFO(external);
    CHECK(page.find(external) == std::string::npos);
  }
  CHECK(page.starts_with("<!doctype html>"));
  CHECK(page.find("<svg") != std::string::npos);
}

TEST_CASE("the HTML page has one labelled lane per stream, copy direction and host thread", "[trace][html]") {
  const trace::timeline t = trace::test::pipeline_timeline();
  const std::string page = trace::to_html(t);
  auto marker = [](trace::lane_kind k) { return "fill=\"" + std::string(trace::lane_marker_colour(k)) + "\""; };
  CHECK(count(page, marker(trace::lane_kind::stream)) == trace::test::pipeline_streams);
  CHECK(count(page, marker(trace::lane_kind::copy_h2d)) == 2);  // H2D and D2H share the copy marker
  CHECK(count(page, marker(trace::lane_kind::host_thread)) == 2);
  for (const char* name : {">stream 11 (GPU 0)<", ">stream 12 (GPU 0)<", ">stream 13 (GPU 0)<", ">H2D (GPU 0)<",
                           ">D2H (GPU 0)<", ">io thread<", ">postprocess thread<", ">GPU 0<", ">host<"}) {
    INFO(name);
    CHECK(count(page, name) == 1);
  }
  // One rectangle per span (none narrower than a pixel here, so none merged), coloured by category.
  CHECK(count(page, "class=\"s\"") == t.spans.size());
  CHECK(count(page, "fill=\"" + std::string(trace::category_colour(trace::category::launch)) + "\"><title>") == 6);
}

TEST_CASE("the HTML page has a legend of the categories present and the overlap summary", "[trace][html]") {
  const std::string page = trace::to_html(trace::test::pipeline_timeline());
  for (const char* c : {">launch<", ">copy<", ">pipeline_stage<", ">jit_cache_hit<"}) CHECK(page.find(c) != std::string::npos);
  CHECK(page.find(">memset<") == std::string::npos);
  CHECK(page.find("Overlap summary") != std::string::npos);
  CHECK(page.find("compute (critical)") != std::string::npos);
  CHECK(page.find("dropped") == std::string::npos);
}

TEST_CASE("names and labels are escaped in the HTML page, and a dropped count is shown", "[trace][html]") {
  trace::timeline t;
  trace::span s;
  s.lane = trace::lane::stream(0, 1);
  s.category = trace::category::launch;
  s.begin_ns = 0;
  s.end_ns = 1000;
  s.name = "k<float>";
  s.label = "a & b \"c\" 'd'";
  t.spans.push_back(s);
  t.lanes.push_back({s.lane, "<b>bold</b>"});
  t.dropped = 5;
  const std::string page = trace::to_html(t);
  CHECK(page.find("k&lt;float&gt;") != std::string::npos);
  CHECK(page.find("a &amp; b &quot;c&quot; &#39;d&#39;") != std::string::npos);
  CHECK(page.find("&lt;b&gt;bold&lt;/b&gt;") != std::string::npos);
  CHECK(page.find("<b>") == std::string::npos);
  CHECK(page.find("5 records were dropped") != std::string::npos);
}

TEST_CASE("spans narrower than a pixel are merged, and an empty timeline still renders", "[trace][html]") {
  trace::timeline t;
  for (int i = 0; i < 10'000; ++i) {
    trace::span s;
    s.lane = trace::lane::stream(0, 1);
    s.category = trace::category::launch;
    s.begin_ns = i * 100;
    s.end_ns = i * 100 + 50;
    t.spans.push_back(s);
  }
  const std::string page = trace::to_html(t);
  CHECK(count(page, "class=\"s\"") < 2'000);
  CHECK(page.find("(merged at this scale)") != std::string::npos);
  const std::string empty = trace::to_html(trace::timeline{});
  CHECK(empty.find("0 spans on 0 lanes") != std::string::npos);
  CHECK(empty.find("No copies or kernels") != std::string::npos);
}

TEST_CASE("the HTML page lists the diagnostics' findings after the overlap summary, escaped", "[trace][html]") {
  const std::string clean = trace::to_html(trace::test::pipeline_timeline());
  CHECK(clean.find("Diagnostics</h2>\n<p>No findings: none of the 8 checks fired.</p>") != std::string::npos);

  trace::test::span_builder b;
  b.copy(trace::lane_kind::copy_h2d, 3, 0, 1, 64, trace::flag::pageable_host).name = "copy<script>";
  const std::string page = trace::to_html(b.t);
  const auto summary = page.find("Overlap summary"), diagnostics = page.find("Diagnostics</h2>");
  REQUIRE(diagnostics != std::string::npos);
  CHECK(summary < diagnostics);
  CHECK(page.find("<strong>pageable_copy</strong>: 1 asynchronous copy", diagnostics) != std::string::npos);
  CHECK(page.find("<li>copy&lt;script&gt; on H2D (GPU 0) (stream 3)", diagnostics) != std::string::npos);
  CHECK(page.find("Fix: Copy from and to pinned memory", diagnostics) != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
}
