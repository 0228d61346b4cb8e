// A stall report's one line.
#include <cuasync/async_io/io_watchdog.hpp>

#include <cstdio>

namespace cuasync {
namespace {
std::string milliseconds(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f ms", std::chrono::duration<double, std::milli>(d).count());
  return text;
}
}  // namespace

std::string stall_report::text() const {
  std::string line = "io thread " + std::to_string(thread);
  if (!thread_name.empty()) line += " (" + thread_name + ")";
  line += ": ";
  if (ended) {
    line += "the stall ended after " + milliseconds(duration);
    line += call.empty() ? " (no driver call was in flight)" : " (it was in " + call + ")";
    return line;
  }
  if (call.empty())
    return line + "a handler has run " + milliseconds(duration) + " without yielding (no driver call in flight)";
  line += "blocked for " + milliseconds(duration) + " so far, in " + call + " for " + milliseconds(call_duration);
  if (*where.file_name())
    line += ", called from " + std::string(where.file_name()) + ":" + std::to_string(where.line()) + " (`" +
            where.function_name() + "`)";
  if (!frames.empty()) {
    line += "; frames: ";
    for (std::size_t i = 0; i < frames.size(); ++i) line += (i ? " | " : "") + frames[i];
  }
  return line;
}

}  // namespace cuasync
