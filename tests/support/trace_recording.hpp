// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// For tests of the library's trace hooks: records from construction to destruction (trace::enable), starting from an
// empty recorder and leaving one behind; the launch spans measured on the GPU; the simulated driver's sleep kernel.
#include <cuasync/trace/recorder.hpp>

#include <vector>

namespace cuasync::test {

// sim_sleep_ms(ms) takes that long on the simulated driver (tests/fake_driver); a no-op elsewhere.
inline constexpr char sim_sleep_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_sleep_ms(.param .u32 ms) { ret; }
)";

// The launch spans measured on the GPU that the recorder holds, in the order they began.
inline std::vector<trace::span> gpu_launch_spans() {
  std::vector<trace::span> out;
  for (const trace::span& s : trace::snapshot().spans)
    if (s.clock == trace::clock_source::gpu_events && s.category == trace::category::launch) out.push_back(s);
  return out;
}

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
