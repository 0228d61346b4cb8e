// `cuasync trace TRACE.json`: renders a recorded trace as the self-contained HTML page and prints its overlap
// summary and the diagnostics' findings. Needs no GPU.
#include "commands.hpp"

#include <cuasync/trace/chrome_json.hpp>
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/json.hpp>
#include <cuasync/trace/overlap.hpp>
#include <cuasync/trace/recorder.hpp>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace cuasync::tools {
namespace {

int run(invocation& inv) {
  std::string input, output;
  bool html = true;
  std::optional<int> device;
  argument_walker args(inv.args());
  while (!args.done()) {
    const std::string a = args.next();
    if (a == "-o" || a == "--output") {
      if (!args.value(output)) return inv.usage_error(a + " needs a file");
    } else if (a == "--no-html") {
      html = false;
    } else if (a == "--device") {
      std::string v;
      int n = -1;
      if (!args.value(v) || std::from_chars(v.data(), v.data() + v.size(), n).ptr != v.data() + v.size() || n < 0)
        return inv.usage_error("--device needs a device ordinal (0, 1, ...)");
      device = n;
    } else if (!a.starts_with("-") && input.empty()) {
      input = a;
    } else {
      return inv.usage_error("unknown option '" + a + "'");
    }
  }
  if (input.empty()) return inv.usage_error("no TRACE.json given");
  if (html && output.empty()) {
    output = std::filesystem::path(input).replace_extension(".html").string();
    if (output == input) return inv.usage_error("the page would overwrite the input; name it with -o");
  }

  std::ifstream in(input, std::ios::binary);
  if (!in) return inv.fail(exit_failure, "io_error", "cannot open '" + input + "'");
  std::stringstream text;
  text << in.rdbuf();
  trace::timeline t;
  std::size_t skipped = 0;
  try {
    t = trace::read_chrome_json(text.str(), &skipped);
  } catch (const std::exception& e) {
    return inv.fail(exit_failure, "bad_trace", input + ": " + e.what());
  }
  if (html) try {
      trace::write_file(t, output);
    } catch (const std::exception& e) {
      return inv.fail(exit_failure, "io_error", e.what());
    }
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
    w.key("summary").raw(trace::to_json(summary));
    w.key("diagnostics").raw(trace::to_json(findings)).end_object();
    std::printf("%s\n", w.str().c_str());
    return exit_ok;
  }
  std::printf("cuasync trace %s\n", input.c_str());
  std::printf("  %-8s %zu on %zu lanes\n", "spans", t.spans.size(), t.lanes.size());
  if (t.dropped)
    std::printf("  %-8s %llu records dropped at the recorder's cap: the trace is incomplete\n", "warning",
                static_cast<unsigned long long>(t.dropped));
  if (skipped) std::printf("  %-8s %zu events of other phases than X and M left out\n", "skipped", skipped);
  if (html) std::printf("  %-8s %s\n", "html", output.c_str());
  if (device) std::printf("  %-8s GPU %d only\n", "summary", *device);
  std::printf("\n%s", trace::to_text(summary).c_str());
  std::printf("\n%s", trace::to_text(findings).c_str());
  return exit_ok;
}

}  // namespace

const command trace_command{
    "trace",
    "render a recorded trace.json as an HTML timeline and print its overlap summary and diagnostics (no GPU needed)",
    "usage: cuasync trace TRACE.json [-o PAGE.html] [--no-html] [--device N]\n"
    "Reads a trace cuasync recorded (CUASYNC_TRACE=trace.json, or cuasync::trace::flush()), or any Chrome trace\n"
    "event JSON with complete (X) events, writes it as one self-contained HTML page (inline SVG: a lane per stream,\n"
    "copy direction and host thread) and prints the overlap summary: busy time of H2D, compute and D2H, how much\n"
    "of each overlapped the others, and the critical stage; then the diagnostics: what serialized the GPU or\n"
    "stalled the host (pageable copies, the legacy stream, device-wide syncs, ...), each with the fix\n"
    "(docs/tracing.md). --json gives them as \"diagnostics\", an array of {id, occurrences, summary, ...}.\n"
    "  -o, --output PAGE.html   where to write the page (default: TRACE with .html for its extension)\n"
    "  --no-html                only the summary and the diagnostics\n"
    "  --device N               the summary of GPU N's lanes only (the page and the diagnostics cover every lane)\n",
    run};

}  // namespace cuasync::tools
