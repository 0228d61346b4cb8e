// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: the trace reader (`cuasync trace` reads files users hand over). Any text is an error or a timeline;
// a timeline renders (HTML, summary, diagnostics), and one whose times are small enough to be exact in a double reads back
// from its own JSON unchanged.
#include <cuasync/trace/chrome_json.hpp>

#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/json.hpp>
#include <cuasync/trace/overlap.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace trace = cuasync::trace;
  trace::timeline t;
  try {
    t = trace::read_chrome_json(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception&) {
    return 0;  // json::parse_error or std::runtime_error: refused, as it should be
  }
  (void)trace::to_html(t);
  (void)trace::to_text(trace::summarize(t));
  (void)trace::to_json(trace::diagnose(t));  // to_html() wrote them as HTML
  bool exact = true;  // microseconds with three decimals survive a double, and back to ns, below 2^40 µs
  for (const trace::span& s : t.spans)
    exact = exact && std::llabs(s.begin_ns - t.origin_ns) < (1ll << 49) && s.end_ns - s.begin_ns < (1ll << 49);
  if (exact && !(trace::read_chrome_json(trace::to_chrome_json(t)).spans == t.spans)) std::abort();
  return 0;
}
