// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The diagnostics: every rule run over a normalized copy of the timeline, and the findings as text and JSON. What
// the rules share (which spans are GPU work, how a span is named) is here too.
#include <cuasync/trace/diagnostics.hpp>

#include "diagnostic_rules.hpp"

#include <cuasync/trace/json.hpp>
#include <cuasync/trace/overlap.hpp>

#include <array>
#include <cstdio>

namespace cuasync::trace {
namespace {
constexpr std::array<std::string_view, diagnostic_count> diagnostic_names = {
    "pageable_copy",        "default_stream_serialization", "device_synchronize",     "copies_not_overlapped",
    "kernel_filled_device", "host_wait",                    "allocation_on_hot_path", "buffer_reused_in_flight",
    "host_bound_pipeline",  "gpu_idle_round_trip",          "too_few_slots"};
}  // namespace

std::string_view to_string(diagnostic d) noexcept {
  const auto i = static_cast<std::size_t>(d);
  return i < diagnostic_names.size() ? diagnostic_names[i] : "unknown";
}

std::vector<finding> diagnose(const timeline& input) {
  timeline t = input;
  t.normalize();
  using rule = std::optional<finding> (*)(const timeline&);
  // In the order of `diagnostic`.
  constexpr std::array<rule, diagnostic_count> rules = {
      detail::find_pageable_copies,      detail::find_default_stream_serialization,
      detail::find_device_synchronize,   detail::find_copies_not_overlapped,
      detail::find_kernel_filled_device, detail::find_host_waits,
      detail::find_allocations_on_hot_path, detail::find_buffers_reused_in_flight,
      detail::find_host_bound_pipeline,  detail::find_gpu_idle_round_trips,
      detail::find_too_few_slots};
  std::vector<finding> out;
  for (rule r : rules)
    if (auto f = r(t)) out.push_back(std::move(*f));
  return out;
}

std::string to_text(const std::vector<finding>& findings) {
  if (findings.empty()) return "diagnostics: no findings (none of the " + std::to_string(diagnostic_count) +
                               " checks fired)\n";
  std::string out = "diagnostics: " + std::to_string(findings.size()) +
                    (findings.size() == 1 ? " finding\n" : " findings\n");
  for (const finding& f : findings) {
    out += "\n[" + std::string(to_string(f.kind)) + "] " + f.summary + "\n";
    out += "  why: " + f.explanation + "\n";
    out += "  fix: " + f.fix + "\n";
    for (const std::string& e : f.examples) out += "  e.g. " + e + "\n";
  }
  return out;
}

std::string to_json(const std::vector<finding>& findings) {
  json::writer w;
  w.begin_array();
  for (const finding& f : findings) {
    w.begin_object().member("id", to_string(f.kind));
    w.member("occurrences", static_cast<std::uint64_t>(f.occurrences));
    w.member("summary", f.summary).member("explanation", f.explanation).member("fix", f.fix);
    w.key("examples").begin_array();
    for (const std::string& e : f.examples) w.value(e);
    w.end_array().end_object();
  }
  w.end_array();
  return w.take();
}

namespace detail {

bool is_gpu_work(const span& s) noexcept { return s.lane.kind != lane_kind::host_thread; }

bool is_issue(const span& s) noexcept {
  return s.lane.kind == lane_kind::host_thread && s.stream_id != 0 &&
         (s.category == category::launch || s.category == category::copy || s.category == category::memset);
}

std::uint64_t issuing_stream(const span& s) noexcept {
  return s.lane.kind == lane_kind::stream ? s.lane.id : s.stream_id;
}

std::string format_bytes(std::uint64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (bytes < (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

std::string describe(const timeline& t, const span& s) {
  std::string out = (s.name.empty() ? std::string(to_string(s.category)) : s.name) + " on " + t.lane_name(s.lane);
  if (s.lane.kind != lane_kind::stream && s.stream_id) out += " (stream " + std::to_string(s.stream_id) + ")";
  out += " at " + format_duration(s.begin_ns - t.origin_ns) + ", " + format_duration(s.duration_ns()) + " long";
  if (s.bytes) out += ", " + format_bytes(s.bytes);
  if (!s.label.empty()) out += ", label \"" + s.label + "\"";
  return out;
}

void add_place(finding& f, const span& s) {
  if (f.places.size() < max_finding_places) f.places.push_back({s.lane, s.begin_ns, s.end_ns});
}

void add_example(finding& f, const timeline& t, const span& s) {
  if (f.examples.size() < max_examples) f.examples.push_back(describe(t, s));
  add_place(f, s);
}

}  // namespace detail
}  // namespace cuasync::trace
