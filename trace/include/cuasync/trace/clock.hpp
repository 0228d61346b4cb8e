// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The trace's one clock (the host's steady_clock, in nanoseconds) and the map from GPU event times onto it.
//!
//! A GPU span is measured by timing events: `cuEventElapsedTime(reference, e)` gives each event's time after one
//! reference event, in milliseconds, on the GPU's clock. To put it on the host axis, the recorder needs the host time
//! of the reference. It is estimated from samples: an event `s` observed complete at host time `h` (a query that
//! returned CUDA_SUCCESS, read right after) has elapsed `e` after the reference, so the reference ran at or before
//! `h - e`: every sample is an upper bound (the host saw `s` late, never early), and the smallest is the best.
//!
//! Precision: cuEventElapsedTime returns a float of milliseconds, resolution ~0.5 µs, but a float has 24 bits of
//! mantissa: 1 s after the reference its step is ~60 ns, after 100 s ~8 µs. Keep a reference younger than a few
//! seconds (record a new one and start a new map) so the conversion error stays below a microsecond.

#include <chrono>
#include <cstdint>
#include <limits>

namespace cuasync::trace {

//! Now, in nanoseconds of `std::chrono::steady_clock`: the clock of every span.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

//! Milliseconds as `cuEventElapsedTime` gives them, in nanoseconds (rounded to the nearest).
std::int64_t elapsed_ms_to_ns(float ms) noexcept;

//! Maps times measured on the GPU relative to one reference event onto the host clock.
class gpu_clock_map {
 public:
  gpu_clock_map() = default;
  //! A map from one sample: at host time `host_ns` the host saw an event complete whose elapsed time after the
  //! reference is `elapsed_ns` (use elapsed_ms_to_ns on cuEventElapsedTime's value).
  gpu_clock_map(std::int64_t host_ns, std::int64_t elapsed_ns) noexcept { add_sample(host_ns, elapsed_ns); }

  //! Adds a sample. Each one bounds the reference's host time from above; the map keeps the tightest.
  void add_sample(std::int64_t host_ns, std::int64_t elapsed_ns) noexcept {
    const std::int64_t candidate = host_ns - elapsed_ns;
    if (candidate < reference_host_ns_) reference_host_ns_ = candidate;
  }
  //! Whether any sample was added (a map without one maps nothing).
  bool calibrated() const noexcept { return reference_host_ns_ != unset; }
  //! The estimated host time at which the reference event ran.
  std::int64_t reference_host_ns() const noexcept { return reference_host_ns_; }

  //! The host time of an event `elapsed_ns` after the reference (negative: before it).
  std::int64_t to_host_ns(std::int64_t elapsed_ns) const noexcept { return reference_host_ns_ + elapsed_ns; }
  //! The same for cuEventElapsedTime's milliseconds.
  std::int64_t to_host_ns_from_ms(float elapsed_ms) const noexcept {
    return to_host_ns(elapsed_ms_to_ns(elapsed_ms));
  }

 private:
  static constexpr std::int64_t unset = std::numeric_limits<std::int64_t>::max();
  std::int64_t reference_host_ns_ = unset;
};

}  // namespace cuasync::trace
