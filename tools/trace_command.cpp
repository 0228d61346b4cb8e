// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync trace TRACE.json`: renders a recorded trace as the self-contained HTML page and prints its overlap
// summary and the diagnostics' findings. Needs no GPU.
#include "commands.hpp"

#include <cuasync/trace/chrome_json.hpp>
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/json.hpp>
#include <cuasync/trace/overlap.hpp>
#include <cuasync/trace/recorder.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>

namespace cuasync::tools {
namespace {

// Text for a terminal: names come from the trace file (anyone's), so control characters are shown, not obeyed (an
// escape sequence could clear the screen or retitle it; a NUL would cut the output short).
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\t') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else if (u == 0x7f) {
      out += "\\x7f";
    } else {
      out += c;
    }
  }
  return out;
}

void print(std::string_view s) {
  const std::string p = printable(s);
  std::fwrite(p.data(), 1, p.size(), stdout);
}

struct trace_args {
  std::string input, output;
  bool no_html = false;
  int device = -1;  // -1: every device
};

int run(invocation& inv, trace_args a) {
  const std::string& input = a.input;
  std::string& output = a.output;
  const bool html = !a.no_html;
  const std::optional<int> device = a.device >= 0 ? std::optional<int>(a.device) : std::nullopt;
  std::error_code ec;
  if (std::filesystem::is_directory(input, ec)) return inv.usage_error("'" + input + "' is a directory, not a trace");
  if (html && output.empty()) output = std::filesystem::path(input).replace_extension(".html").string();
  if (html && (output == input || std::filesystem::equivalent(output, input, ec)))
    return inv.usage_error("the page would overwrite the input trace '" + input + "'; name another file with -o");

  std::ifstream in(input, std::ios::binary);
  if (!in)
    return inv.fail(exit_failure, "io_error",
                    "cannot open '" + input + "': " + std::generic_category().message(errno));
  std::stringstream text;
  text << in.rdbuf();
  trace::timeline t;
  std::size_t skipped = 0;
  try {
    t = trace::read_chrome_json(text.str(), &skipped);
  } catch (const std::exception& e) {
    return inv.fail(exit_failure, "bad_trace", input + ": " + e.what());
  }
  if (html) {  // always the page, whatever the name ends with (write_file picks the format by the extension)
    std::ofstream page(output, std::ios::binary | std::ios::trunc);
    if (page) trace::write_html(t, page);
    if (!page)
      return inv.fail(exit_failure, "io_error",
                      "cannot write the page '" + output + "' (name another file with -o, or --no-html)");
  }
  const auto on_device = [&](const trace::lane_info& l) { return l.lane.device == *device; };
  const bool device_absent = device && std::none_of(t.lanes.begin(), t.lanes.end(), on_device);
  const trace::overlap_summary summary = trace::summarize(t, device);
  const std::vector<trace::finding> findings = trace::diagnose(t);  // the whole trace: a rule may span devices

  if (inv.json()) {
    trace::json::writer w;
    w.begin_object().member("input", input).key("html");
    if (html)
      w.value(output);
    else
      w.null();
    w.member("spans", static_cast<std::uint64_t>(t.spans.size()));
    w.member("lanes", static_cast<std::uint64_t>(t.lanes.size()));
    w.member("dropped_records", static_cast<std::uint64_t>(t.dropped));
    w.member("skipped_events", static_cast<std::uint64_t>(skipped)).key("device");
    if (device)
      w.value(*device);
    else
      w.null();
    w.member("device_in_trace", !device_absent);
    w.key("summary").raw(trace::to_json(summary));
    w.key("diagnostics").raw(trace::to_json(findings)).end_object();
    std::printf("%s\n", w.str().c_str());
    return exit_ok;
  }
  std::printf("cuasync trace ");
  print(input);
  std::printf("\n");
  std::printf("  %-8s %zu on %zu lanes\n", "spans", t.spans.size(), t.lanes.size());
  if (t.dropped)
    std::printf("  %-8s %llu records dropped at the recorder's cap: the trace is incomplete\n", "warning",
                static_cast<unsigned long long>(t.dropped));
  if (skipped) std::printf("  %-8s %zu events of other phases than X and M left out\n", "skipped", skipped);
  if (html) {
    std::printf("  %-8s ", "html");
    print(output);
    std::printf("\n");
  }
  if (device) std::printf("  %-8s GPU %d only\n", "summary", *device);
  if (device_absent)  // an empty summary would read as "no GPU work at all"
    std::printf("  %-8s GPU %d has no lane in this trace: its summary is empty\n", "warning", *device);
  std::printf("\n");
  print(trace::to_text(summary));
  std::printf("\n");
  print(trace::to_text(findings));
  return exit_ok;
}

runner declare(option_set& o) {
  auto a = std::make_shared<trace_args>();
  o.positional("TRACE.json", a->input, "a trace cuasync recorded, or any Chrome trace event JSON");
  o.text("-o,--output", a->output, "PAGE.html",
         "where to write the page (default: TRACE with .html for its extension)");
  o.flag("--no-html", a->no_html, "only the summary and the diagnostics");
  o.number("--device", a->device, 0, 1024, "N",
           "the summary of GPU N's lanes only (the page and the diagnostics cover every lane)",
           "a device ordinal (0, 1, ...)");
  return [a](invocation& inv) { return run(inv, *a); };
}

}  // namespace

const command trace_command{
    .name = "trace",
    .summary = "a recorded trace.json as an HTML timeline, with its overlap summary and diagnostics (no GPU needed)",
    .description =
        "Reads a trace cuasync recorded (CUASYNC_TRACE=trace.json, or cuasync::trace::flush()), or any Chrome trace "
        "event JSON with complete (X) events, writes it as one self-contained HTML page (inline SVG: a lane per "
        "stream, copy direction and host thread) and prints the overlap summary: busy time of H2D, compute and D2H, "
        "how much of each overlapped the others, and the critical stage; then the diagnostics: what serialized the "
        "GPU or stalled the host (pageable copies, the legacy stream, device-wide syncs, ...), each with the fix "
        "(docs/tracing.md). --json gives them as \"diagnostics\", an array of {id, occurrences, summary, ...}. No GPU "
        "is needed.",
    .declare = declare,
};

}  // namespace cuasync::tools
