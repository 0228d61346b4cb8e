// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A stall report's one line.
#include <cuasync/async_io/io_watchdog.hpp>

#include <algorithm>
#include <cstdio>

namespace cuasync {
namespace {
std::string milliseconds(std::chrono::nanoseconds d) {
  char text[32];
  const double ms = std::chrono::duration<double, std::milli>(d).count();
  std::snprintf(text, sizeof text, ms < 10 ? "%.1f ms" : "%.0f ms", ms);  // short stalls and their parts need tenths
  return text;
}

// "; stack: a | b | c" for a list of frames.
std::string listed(const char* what, const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) text += (i ? " | " : "") + items[i];
  return items.empty() ? "" : std::string("; ") + what + ": " + text;
}
}  // namespace

std::string stall_report::text() const {
  std::string line = "io thread " + std::to_string(thread);
  if (!thread_name.empty()) line += " (" + thread_name + ")";
  line += ": ";
  if (ended) {
    line += "the stall ended after " + milliseconds(duration);
    line += call.empty() ? " (no driver call was in flight)" : " (it was in " + call + ")";
    if (window.count() > 0) {
      const auto asleep = std::max(window - on_cpu - waiting_for_cpu, std::chrono::nanoseconds(0));
      line += "; the kernel's accounting over " + milliseconds(window) + ": " + milliseconds(on_cpu) + " on a CPU, " +
              milliseconds(waiting_for_cpu) + " waiting for a CPU, " + milliseconds(asleep) + " asleep";
    }
    return line;
  }
  const std::string state_text = state.empty() ? "" : "; state: " + state;
  if (call.empty())
    return line + "a handler has run " + milliseconds(duration) + " without yielding (no driver call in flight)" +
           state_text + listed("stack", stack);
  line += "blocked for " + milliseconds(duration) + " so far, in " + call + " for " + milliseconds(call_duration);
  if (*where.file_name())
    line += ", called from " + std::string(where.file_name()) + ":" + std::to_string(where.line()) + " (`" +
            where.function_name() + "`)";
  return line + listed("frames", frames) + state_text;
}

}  // namespace cuasync
