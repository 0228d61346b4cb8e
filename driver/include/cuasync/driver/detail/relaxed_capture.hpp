// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Internal: cuasync's own threads (`serial_worker`: the grower, the reaper, the compile threads) allocate and free
//! pinned memory and load modules, calls the driver deems unsafe during a stream capture. In the default (global)
//! capture mode such a call from any thread invalidates another thread's capture begun in global mode
//! (`torch.cuda.graph`'s): on the H100 a replay anchor's capture in the GPU conformance suite was invalidated by a
//! background allocation that ran meanwhile. `serial_worker` runs each task in relaxed mode, which lets the call
//! through without touching anyone's capture.
#include <cuasync/driver/detail/driver_api.hpp>

namespace cuasync::detail {

//! Relaxed capture mode on the calling thread for its lifetime, then the previous mode. Never throws: without a
//! driver, or when the driver refuses, the mode stays as it was.
class relaxed_capture_scope {
 public:
  relaxed_capture_scope() noexcept : driver_(driver_if_loaded()) {
    if (driver_ && driver_->cuThreadExchangeStreamCaptureMode(&previous_) != CUDA_SUCCESS) driver_ = nullptr;
  }
  ~relaxed_capture_scope() {
    if (driver_) (void)driver_->cuThreadExchangeStreamCaptureMode(&previous_);
  }
  relaxed_capture_scope(const relaxed_capture_scope&) = delete;
  relaxed_capture_scope& operator=(const relaxed_capture_scope&) = delete;

 private:
  const driver_entry_points* driver_;
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

}  // namespace cuasync::detail
