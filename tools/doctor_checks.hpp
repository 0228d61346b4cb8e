// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The measurements `cuasync doctor` makes on a device, each short: pinned against pageable H2D bandwidth, the round
// trip of an awaited empty kernel, and a short traced run of the demo's service for the overlap and the diagnostics.
#include "diagnostics_report.hpp"

#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/trace/overlap.hpp>

#include <chrono>

namespace cuasync::tools::doctor {

struct bandwidth {
  std::size_t bytes = 0;
  double pinned_gbps = 0, pageable_gbps = 0;  //!< H2D, median of the repetitions
};
//! `bytes` H2D from pinned and from pageable memory, `reps` times each, alternating. @throws cuda_error
bandwidth measure_h2d(runtime::device_runtime& rt, std::size_t bytes, int reps, std::chrono::seconds timeout);

struct await_latency {
  std::size_t samples = 0;
  double p50_us = 0, p99_us = 0;
};
//! `samples` times: launch an empty kernel, co_await async_wait on its stream (one io thread). @throws cuda_error
await_latency measure_await(runtime::device_runtime& rt, kernel_ref empty, std::size_t samples,
                            std::chrono::seconds timeout);

struct pipeline_check {
  std::size_t requests = 0, wrong = 0;
  trace::overlap_summary overlap;
  std::size_t spans = 0;
  diagnostics_report diagnostics;
};
//! A short traced run of the demo's service (3 slots). @throws cuda_error (a timeout ends the command)
pipeline_check traced_pipeline(runtime::device_runtime& rt, kernel_ref infer, std::chrono::seconds timeout);

}  // namespace cuasync::tools::doctor
