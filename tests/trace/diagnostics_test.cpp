// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The diagnostics as a whole: a clean pipeline has no findings (in memory and read back from the committed trace),
// and findings read as text and as JSON.
#include <cuasync/trace/diagnostics.hpp>

#include <cuasync/trace/chrome_json.hpp>
#include <cuasync/trace/json.hpp>

#include "read_file.hpp"
#include "span_builder.hpp"
#include "synthetic_pipeline.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;
namespace json = cuasync::trace::json;
using trace::diagnostic;
using trace::test::span_builder;

TEST_CASE("a clean pipeline has no findings", "[trace][diagnostics]") {
  CHECK(trace::diagnose(trace::test::pipeline_timeline()).empty());
  const trace::timeline committed =
      trace::read_chrome_json(trace::test::read_file(CUASYNC_TRACE_TEST_DATA "/pipeline_trace.json"));
  const auto findings = trace::diagnose(committed);
  CHECK(findings.empty());
  CHECK(trace::to_text(findings) == "diagnostics: no findings (none of the 11 checks fired)\n");
  CHECK(json::parse(trace::to_json(findings)).as_array().empty());
  CHECK(trace::diagnose(trace::timeline{}).empty());
}

TEST_CASE("every diagnostic has its id", "[trace][diagnostics]") {
  CHECK(trace::to_string(diagnostic::pageable_copy) == "pageable_copy");
  CHECK(trace::to_string(diagnostic::buffer_reused_in_flight) == "buffer_reused_in_flight");
  CHECK(trace::to_string(static_cast<diagnostic>(trace::diagnostic_count)) == "unknown");
}

namespace {
// Two findings: a pageable copy (whose name needs escaping in JSON) and a device-wide synchronization.
span_builder two_problems() {
  span_builder b;
  b.issue(1, trace::category::launch, 5, "k", 0, 5);
  b.copy(trace::lane_kind::copy_h2d, 5, 10, 400, 1 << 20, trace::flag::pageable_host).label = "batch \"7\"";
  b.host(1, trace::category::sync, "cuCtxSynchronize", 10, 400, trace::flag::device_wide);
  b.issue(1, trace::category::launch, 5, "k", 410, 415);
  return b;
}
}  // namespace

TEST_CASE("findings are returned in the order of the diagnostics, and read as text", "[trace][diagnostics]") {
  const auto findings = two_problems().diagnose();
  REQUIRE(findings.size() == 2);
  CHECK(findings[0].kind == diagnostic::pageable_copy);
  CHECK(findings[1].kind == diagnostic::device_synchronize);
  const std::string text = trace::to_text(findings);
  CHECK(text.find("diagnostics: 2 findings\n") == 0);
  CHECK(text.find("\n[pageable_copy] 1 asynchronous copy to or from pageable host memory") != std::string::npos);
  CHECK(text.find("\n  why: The copy engines") != std::string::npos);
  CHECK(text.find("\n  fix: Copy from and to pinned memory") != std::string::npos);
  CHECK(text.find("\n  e.g. cuMemcpyHtoDAsync on H2D (GPU 0) (stream 5)") != std::string::npos);
  CHECK(text.find("[device_synchronize]") != std::string::npos);
}

TEST_CASE("findings as JSON: id, occurrences, summary, explanation, fix, examples", "[trace][diagnostics]") {
  const auto findings = two_problems().diagnose();
  const json::value v = json::parse(trace::to_json(findings));
  REQUIRE(v.as_array().size() == 2);
  const json::value& first = v.as_array()[0];
  CHECK(first.find("id")->as_string() == "pageable_copy");
  CHECK(first.find("occurrences")->as_number() == 1);
  CHECK(first.find("summary")->as_string() == findings[0].summary);
  CHECK(first.find("explanation")->as_string() == findings[0].explanation);
  CHECK(first.find("fix")->as_string() == findings[0].fix);
  REQUIRE(first.find("examples")->as_array().size() == 1);
  CHECK(first.find("examples")->as_array()[0].as_string().find("label \"batch \"7\"\"") != std::string::npos);
  CHECK(v.as_array()[1].find("id")->as_string() == "device_synchronize");
}

TEST_CASE("a finding lists at most five examples", "[trace][diagnostics]") {
  span_builder b;
  for (int i = 0; i < 12; ++i)
    b.copy(trace::lane_kind::copy_h2d, 5, i * 10, i * 10 + 5, 64, trace::flag::pageable_host);
  const auto findings = b.diagnose();
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].occurrences == 12);
  CHECK(findings[0].examples.size() == 5);
}

TEST_CASE("a trace read from a file that shows every problem: each diagnostic fires", "[trace][diagnostics]") {
  // data/all_diagnostics.json (also in the trace reader's fuzz corpus): Chrome trace events with flags,
  // addresses and a described device, as the hooks write them.
  const trace::timeline t =
      trace::read_chrome_json(trace::test::read_file(CUASYNC_TRACE_TEST_DATA "/all_diagnostics.json"));
  const auto findings = trace::diagnose(t);
  REQUIRE(findings.size() == trace::diagnostic_count);
  for (int d = 0; d < trace::diagnostic_count; ++d) {
    INFO(trace::to_string(static_cast<diagnostic>(d)));
    CHECK(findings[static_cast<std::size_t>(d)].kind == static_cast<diagnostic>(d));
    CHECK(findings[static_cast<std::size_t>(d)].occurrences > 0);
    CHECK_FALSE(findings[static_cast<std::size_t>(d)].examples.empty());
  }
}
