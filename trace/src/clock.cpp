// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU side of the trace's clock: cuEventElapsedTime's float milliseconds in nanoseconds.
#include <cuasync/trace/clock.hpp>

#include <cmath>

namespace cuasync::trace {

std::int64_t elapsed_ms_to_ns(float ms) noexcept {
  // Through double: the float's value is exact there, and so is the product up to 2^53 ns (104 days).
  return static_cast<std::int64_t>(std::llround(static_cast<double>(ms) * 1e6));
}

}  // namespace cuasync::trace
