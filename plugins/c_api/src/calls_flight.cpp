// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder (ABI 1.3): turning it on and off, and dumping it into the caller's buffer.
#include "calls.hpp"

#include <cuasync/trace/flight_recorder.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>

namespace cuasync::c_api {

cuasync_error* flight_recorder_set(cuasync_flight_recorder_set_args* a) noexcept {
  return call("flight_recorder_set", a, [](args<cuasync_flight_recorder_set_args>& x) {
    if (x->per_stream == 0) return trace::flight::disable();
    if (x->per_stream < 8 || x->per_stream > 65536)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "flight_recorder_set: per_stream is " + std::to_string(x->per_stream) +
                                               "; keep 8 to 65536 operations per stream, or 0 to turn it off");
    if (x->signal < 0 || x->signal >= NSIG)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "flight_recorder_set: " + std::to_string(x->signal) +
                                               " is not a signal number (0: no signal)");
    trace::flight::options o;
    o.per_stream = x->per_stream;
    o.stall = std::chrono::milliseconds(x->stall_ms);
    o.directory = x->directory ? x->directory : "";
    o.signal = x->signal;
    trace::flight::enable(o);
  });
}

cuasync_error* flight_recorder_dump(cuasync_flight_recorder_dump_args* a) noexcept {
  return call("flight_recorder_dump", a, [](args<cuasync_flight_recorder_dump_args>& x) {
    if (x->format != CUASYNC_FLIGHT_TEXT && x->format != CUASYNC_FLIGHT_CHROME_JSON)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "flight_recorder_dump: format " + std::to_string(x->format) +
                                               " is not CUASYNC_FLIGHT_TEXT (0) or CUASYNC_FLIGHT_CHROME_JSON (1)");
    if (!x->buffer && x->capacity)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "flight_recorder_dump: a capacity without a buffer");
    std::string reason = x->reason ? x->reason : "asked for by the caller";
    std::string out;
    if (x->write_files) {
      const trace::flight::dump_result d = trace::flight::dump(reason);
      out = x->format == CUASYNC_FLIGHT_TEXT ? d.text : trace::flight::chrome_json(trace::flight::take(reason));
    } else {
      const trace::flight::snapshot s = trace::flight::take(std::move(reason));
      out = x->format == CUASYNC_FLIGHT_TEXT ? trace::flight::text(s) : trace::flight::chrome_json(s);
    }
    x->size = out.size();
    if (x->capacity) {
      const std::size_t n = std::min(out.size(), x->capacity - 1);
      std::memcpy(x->buffer, out.data(), n);
      x->buffer[n] = '\0';
    }
  });
}

}  // namespace cuasync::c_api
