// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Green contexts: a context that runs its kernels on a set of the device's SMs only (CUDA 12.4+), so that a
//! latency-critical loop keeps its SMs while another context saturates the rest. `green_context::create(dev, n)`
//! splits off at least `n` SMs (rounded up to the device's partition granularity: 8 on compute capability 9.0) and
//! makes a green context on them; `context()` is an ordinary `context_ref` for it, which every cuasync object takes
//! (`device_runtime::adopt(g.context())` for a runtime with its own streams, pools and completion). A driver without
//! green contexts (older than 12.4, or the simulated one) is refused with a `driver_too_old_error` saying so.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device.hpp>

#include <source_location>
#include <utility>

namespace cuasync {

//! An owned green context. Move-only; destroying it destroys the green context (its streams and memory must be gone
//! first, as for any context).
class green_context {
 public:
  green_context() = default;
  //! A green context on at least `sm_count` of `dev`'s SMs, taken from the device's whole set (green contexts made
  //! this way may overlap: two of 1/4 and 3/4 of the SMs are made with `split`). @throws cuda_error for 0 or more SMs
  //! than the device has, driver_too_old_error where the driver has no green contexts, or the driver's error
  static green_context create(cuasync::device dev, unsigned sm_count,
                              std::source_location where = std::source_location::current());
  //! Disjoint green contexts on `dev`: the first on at least `first_sm_count` SMs, the second on the SMs left (at
  //! least `first_sm_count` must leave some). @throws cuda_error (as `create`)
  static std::pair<green_context, green_context> split(cuasync::device dev, unsigned first_sm_count,
                                                       std::source_location where = std::source_location::current());
  green_context(green_context&& o) noexcept
      : green_(std::exchange(o.green_, nullptr)), ctx_(std::exchange(o.ctx_, {})), sm_count_(o.sm_count_) {}
  green_context& operator=(green_context&& o) noexcept;
  green_context(const green_context&) = delete;
  green_context& operator=(const green_context&) = delete;
  ~green_context();

  //! The green context as a context (`cuCtxFromGreenCtx`): streams created in it run on its SMs.
  context_ref context() const noexcept { return ctx_; }
  //! The SMs it was given (the request rounded up to the device's granularity).
  unsigned sm_count() const noexcept { return sm_count_; }
  CUgreenCtx get() const noexcept { return green_; }
  explicit operator bool() const noexcept { return green_ != nullptr; }

  //! True when the loaded driver has the green-context entry points. Loads the driver. @throws cuda_error when none
  //! loads
  static bool supported(std::source_location where = std::source_location::current());

 private:
  static green_context from_resource(cuasync::device dev, CUdevResource& resource, std::source_location where);
  CUgreenCtx green_ = nullptr;
  context_ref ctx_;
  unsigned sm_count_ = 0;
};

}  // namespace cuasync
