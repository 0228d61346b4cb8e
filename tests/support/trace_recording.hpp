#pragma once
// For tests of the library's trace hooks: records from construction to destruction (trace::enable), starting from an
// empty recorder and leaving one behind.
#include <cuasync/trace/recorder.hpp>

namespace cuasync::test {

class trace_recording {
 public:
  trace_recording() {
    trace::clear();
    trace::enable({});
  }
  ~trace_recording() {
    trace::disable();
    trace::clear();
  }
  trace_recording(const trace_recording&) = delete;
  trace_recording& operator=(const trace_recording&) = delete;
};

}  // namespace cuasync::test
