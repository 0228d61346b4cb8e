// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What `cuasync demo` found, and how it prints it: as text for people, as one JSON object for scripts.
#include "demo_jit.hpp"
#include "demo_service.hpp"
#include "diagnostics_report.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <cuasync/trace/overlap.hpp>

#include <optional>
#include <string>

namespace cuasync::tools::demo {

//! A variant's runs (all rounds) put together.
struct variant {
  std::size_t slots = 0, requests = 0, wrong = 0;
  double seconds = 0, preprocess_us = 0, check_us = 0;
  std::vector<double> latency_us;
  std::string first_wrong;
  void add(run_result r);
  run_result merged() const;
};

struct results {
  jit_report jit;
  std::string no_gpu;  //!< why there is no GPU (empty: there is one)
  // The GPU part (when there is a GPU).
  int device = 0;
  std::string device_name, compute_capability;
  int copy_engines = 0;
  double kernel_load_ms = 0;  //!< the runtime's kernel cache: compile or cache hit, and the module load
  std::size_t request_bytes = 0, rounds = 0, threads = 0, parts = 0;
  int kernel_iterations = 0;
  stage_times stages;
  variant pipelined, serial;
  std::optional<run_result> traced;
  trace::overlap_summary overlap;
  std::size_t trace_spans = 0;
  std::uint64_t trace_dropped = 0;
  diagnostics_report diagnostics;
  std::string trace_file, timeline_file;
  //! The io-thread watchdog around the runs (threshold 0: it was off) and its reports, one line each.
  std::chrono::milliseconds watchdog_threshold{0};
  std::vector<std::string> watchdog_reports;
  bool verified() const noexcept {
    return stages.calibration_wrong < 0 && pipelined.wrong == 0 && serial.wrong == 0 && (!traced || !traced->wrong);
  }
  //! The traced run's wall time per request over the bound (stage_times::bound_us): what the pipeline benchmark
  //! reports as time / bound.
  double wall_over_bound() const;
  //! From the traced run's overlap summary: window over the critical stage's busy time (the same figure).
  double window_over_critical() const;
  //! The traced run's trace window over its wall-clock time: how well the timeline accounts for the run (issue 12's
  //! 5% check; the window leaves out the first preprocess and the last check, host work outside the GPU's span).
  double window_over_wall() const;
  //! The pipelined rounds' wall time per request over the bound measured alone, and under the runs' host load.
  double over_bound() const;
  double over_loaded_bound() const;
  //! What the run shows, in one line: requests/s against serial, time per request against both bounds, overlap.
  std::string headline() const;
};

void print_text(const results& r);
//! "what this run shows: ..." (results::headline), the text output's last line.
void print_headline(const results& r);
//! One JSON object; `error_status` and `error_message` add {"error": {...}} (the no-GPU and failure cases).
void print_json(const results& r, int error_status = 0, const std::string& error_kind = {},
                const std::string& error_message = {});

}  // namespace cuasync::tools::demo
