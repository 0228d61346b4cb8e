#pragma once
// The seed's §16 service as coroutines on the runtime: N slots, each with pinned input and output buffers, device
// buffers and a non-blocking stream. One coroutine per slot takes the next request and runs
//   CPU preprocess (fill the input) -> H2D -> kernel -> D2H -> CPU postprocess (check the response)
// on one io thread that never waits for the GPU: the CPU stages run on async_io's blocking pool, the GPU stages are
// enqueued back to back and awaited once (async_wait on the slot's stream). With one slot it is the serial version:
// the same code, kernels and sizes, one request at a time.
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/async_io/io_watchdog.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::tools::demo {

//! Waits for `s`'s work by polling an event, so that a hung GPU ends the command (exit_gpu_hung) instead of hanging
//! it. @throws cuda_error with a device error
void wait_idle(stream_ref s, std::chrono::seconds timeout, const std::string& what);

//! Each GPU stage of one request run alone (microseconds), as the calibration measured it.
struct stage_times {
  double h2d_us = 0, kernel_us = 0, d2h_us = 0;
  //! An H2D and a D2H copy at once on two streams (both directions share the link: each is slower than alone);
  //! 0 when there was one slot only.
  double copies_together_us = 0;
  double preprocess_us = 0, check_us = 0;  //!< the CPU stages, on one thread (they run on async_io's pool)
  //! What a request costs when the GPU stages overlap perfectly: the kernel or both copies at once, whichever is
  //! longer (the pipeline benchmark's bound, bench/runtime).
  double bound_us() const noexcept;
};

//! One run of the service.
struct run_result {
  std::size_t slots = 0, requests = 0;
  double seconds = 0;
  std::vector<double> latency_us;  //!< per request: taken by a slot -> response checked
  std::size_t wrong = 0;           //!< responses that failed the check
  std::string first_wrong;         //!< which, and where
  double requests_per_second() const noexcept;
  double percentile_us(double p) const;  //!< p in [0, 1]
};

class service {
 public:
  //! Allocates `max_slots` slots of `request_bytes` each (blocking driver calls: call outside coroutines).
  //! @throws cuda_error
  service(runtime::device_runtime& rt, kernel_ref infer, std::size_t request_bytes, std::size_t max_slots);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  //! Picks the kernel's steps so that it takes about as long as the H2D copy, and measures each stage alone.
  //! @throws cuda_error (a GPU that does not finish within `timeout` ends the command: exit_gpu_hung)
  stage_times calibrate(std::chrono::seconds timeout);
  int iterations() const noexcept { return iters_; }

  //! Serves `requests` requests (ids from `first_request`) with `slots` slots. `on_progress(done)` is called on the
  //! io thread now and then. A run that does not finish within `timeout` ends the command (exit_gpu_hung).
  //! @throws what a stage threw, cuda_error
  run_result run(std::size_t slots, std::size_t requests, std::size_t first_request,
                                std::chrono::seconds timeout,
                                const std::function<void(std::size_t done)>& on_progress = {});

  std::size_t request_bytes() const noexcept { return bytes_; }
  //! Each run's io_context is watched by `w` (null: none); `w` must outlive the runs.
  void watch_with(io_watchdog* w) noexcept { watchdog_ = w; }

 private:
  struct slot {
    pinned_buffer input, output;
    device_buffer input_device, output_device;
    stream gpu_stream;
  };
  struct run_state;
  void enqueue_gpu(slot& s, std::size_t request);

  runtime::device_runtime& rt_;
  kernel_ref infer_;
  std::size_t bytes_;
  int iters_ = 1024;
  std::vector<slot> slots_;
  io_watchdog* watchdog_ = nullptr;
};

}  // namespace cuasync::tools::demo
