// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The demo's inference service as coroutines on the runtime: N slots, each with pinned input and output buffers,
// device buffers and a non-blocking stream. One coroutine per slot, on one io thread that never waits for the GPU
// and runs no CPU stage itself, loops:
//   one trip to the service's thread pool: check the slot's last response (CPU), take the next request, preprocess
//   it (CPU), enqueue H2D -> kernel -> D2H on the slot's stream;  then co_await the stream.
// A request costs one hand-off to the pool and one back, and its GPU work starts on the thread that preprocessed it,
// without waiting for the io thread. Each CPU stage may be split into parts that run at once on the pool. With one
// slot it is the serial version: the same code, kernels and sizes, one request at a time.
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/async_io/io_watchdog.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::tools::demo {

//! The service's defaults (`cuasync demo`, `cuasync doctor`): docs/tracing.md "The demo's defaults" says how they
//! were chosen (scripts/demo-sweep.sh measures the alternatives).
inline constexpr std::size_t default_slots = 12, default_threads = 8, default_parts = 1;

//! Waits for `s`'s work by polling an event, so that a hung GPU ends the command (exit_gpu_hung) instead of hanging
//! it. @throws cuda_error with a device error
void wait_idle(stream_ref s, std::chrono::seconds timeout, const std::string& what);

//! The GPU stages of one request run alone (microseconds), as a calibration measured them.
struct gpu_stage_times {
  double h2d_us = 0, kernel_us = 0, d2h_us = 0;
  //! An H2D and a D2H copy at once on two streams (both directions share the link: each is slower than alone);
  //! 0 when there was one slot only.
  double copies_together_us = 0;
  //! What a request costs when the GPU stages overlap perfectly: the kernel or both copies at once, whichever is
  //! longer (the pipeline benchmark's bound, bench/runtime).
  double bound_us() const noexcept;
};

//! The calibration: the GPU stages with the host idle, and again under a host load like the pipelined run's.
struct stage_times {
  gpu_stage_times alone;
  //! Measured while `load_threads` threads preprocess and check back to back (host memory is shared with the
  //! copies); all zero when not measured.
  gpu_stage_times loaded;
  std::size_t load_threads = 0;
  //! The CPU stages of one request on one thread, the data in cache (their times in the runs are in run_result).
  double preprocess_us = 0, check_us = 0;
  //! The timed check's verdict on the calibration's response (request 0): the first wrong index, or -1.
  long calibration_wrong = -1;
  double bound_us() const noexcept { return alone.bound_us(); }
  double loaded_bound_us() const noexcept { return loaded.bound_us(); }
};

//! One run of the service.
struct run_result {
  std::size_t slots = 0, requests = 0;
  double seconds = 0;
  std::vector<double> latency_us;  //!< per request: taken by a slot -> response checked
  //! Sums over the requests of their CPU stages' wall time (all parts), as they ran in this run.
  double preprocess_us = 0, check_us = 0;
  std::size_t wrong = 0;           //!< responses that failed the check
  std::string first_wrong;         //!< which, and where
  double requests_per_second() const noexcept;
  double us_per_request() const noexcept;
  double percentile_us(double p) const;  //!< p in [0, 1]
};

class service {
 public:
  //! Allocates `max_slots` slots of `request_bytes` each (blocking driver calls: call outside coroutines) and starts
  //! a pool of `threads` threads for the CPU stages, each split into `parts` parts.
  //! @throws cuda_error
  service(runtime::device_runtime& rt, kernel_ref infer, std::size_t request_bytes, std::size_t max_slots,
          std::size_t threads, std::size_t parts);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  //! Picks the kernel's steps so that it takes about as long as the H2D copy, and measures each stage alone.
  //! @throws cuda_error (a GPU that does not finish within `timeout` ends the command: exit_gpu_hung)
  stage_times calibrate(std::chrono::seconds timeout);
  //! Measures the GPU stages again while `threads` threads run the CPU stages back to back (the host load of a
  //! pipelined run that keeps that many threads busy). @throws cuda_error
  gpu_stage_times calibrate_loaded(std::size_t threads, std::chrono::seconds timeout);
  int iterations() const noexcept { return iters_; }

  //! Serves `requests` requests (ids from `first_request`) with `slots` slots. `on_progress(done)` is called on the
  //! io thread now and then. A run that does not finish within `timeout` ends the command (exit_gpu_hung).
  //! @throws what a stage threw, cuda_error
  run_result run(std::size_t slots, std::size_t requests, std::size_t first_request, std::chrono::seconds timeout,
                 const std::function<void(std::size_t done)>& on_progress = {});

  std::size_t request_bytes() const noexcept { return bytes_; }
  std::size_t threads() const noexcept { return threads_; }
  std::size_t parts() const noexcept { return parts_; }
  //! Each run's io_context is watched by `w` (null: none); `w` must outlive the runs.
  void watch_with(io_watchdog* w) noexcept { watchdog_ = w; }

 private:
  struct slot {
    pinned_buffer input, output;
    device_buffer input_device, output_device;
    stream gpu_stream;
  };
  struct run_state;
  struct step;
  void enqueue_gpu(slot& s, std::size_t request);
  step cpu_step(slot& s, run_state& state, const step& last);
  gpu_stage_times measure_gpu(std::chrono::seconds timeout);

  runtime::device_runtime& rt_;
  kernel_ref infer_;
  std::size_t bytes_;
  std::size_t threads_, parts_;
  int iters_ = 1024;
  std::vector<slot> slots_;
  boost::asio::thread_pool pool_;
  io_watchdog* watchdog_ = nullptr;
};

}  // namespace cuasync::tools::demo
