// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/poll_policy.hpp>

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace cuasync {

poll_policy poll_policy::from_name(std::string_view name, bool* known) noexcept {
  if (known) *known = true;
  if (name == "latency") return latency();
  if (name == "efficient") return efficient();
  if (name != "balanced" && known) *known = false;
  return balanced();
}

poll_policy poll_policy::from_environment() noexcept {
  const char* name = std::getenv("CUASYNC_POLL_POLICY");
  poll_policy p = name ? from_name(name) : balanced();
  if (const char* predict = std::getenv("CUASYNC_POLL_PREDICT")) p.predict = std::string_view(predict) == "1";
  return p;
}

std::chrono::nanoseconds poll_policy::next_delay(std::chrono::nanoseconds since_activity) const noexcept {
  if (since_activity < spin) return std::chrono::nanoseconds(0);
  const std::chrono::nanoseconds lo = min_sleep.count() > 0 ? min_sleep : std::chrono::nanoseconds(1);
  const std::chrono::nanoseconds hi = std::max(lo, max_sleep);
  const std::chrono::nanoseconds d = since_activity / std::max(1u, backoff_divisor);
  return std::clamp(d, lo, hi);
}

std::chrono::nanoseconds poll_policy::margin(std::chrono::nanoseconds duration) const noexcept {
  return wake_margin + std::min<std::chrono::nanoseconds>(duration / 64, std::chrono::milliseconds(1));
}

std::chrono::nanoseconds poll_policy::overrun_delay(std::chrono::nanoseconds overrun) const noexcept {
  const std::chrono::nanoseconds lo = std::max(min_sleep.count() > 0 ? min_sleep : std::chrono::nanoseconds(1),
                                               wake_margin / 2);
  return std::max(lo, overrun / 8);
}

std::chrono::nanoseconds poll_policy::next_delay(std::chrono::nanoseconds since_activity, const predicted_end* earliest,
                                                 bool unpredicted, bool close_reader) const noexcept {
  if (!predict || !earliest) return next_delay(since_activity);
  const std::chrono::nanoseconds m = margin(earliest->duration);
  if (earliest->until < -m) return next_delay(since_activity);  // missed: the next pass counts it as unpredicted
  const std::chrono::nanoseconds lo = min_sleep.count() > 0 ? min_sleep : std::chrono::nanoseconds(1);
  // What the other pending waits need: the backoff for unpredicted ones, else only the fault check (no spin).
  std::chrono::nanoseconds cover = unpredicted ? next_delay(since_activity) : std::max(lo, fault_check);
  if (!unpredicted && check_divisor) {
    // The earliest predicted wait's own clock: checked at a fraction of its age, in case its estimate is too long.
    const std::chrono::nanoseconds age = std::max(std::chrono::nanoseconds(0), earliest->duration - earliest->until);
    cover = std::min(cover, std::max({lo, 2 * wake_margin, age / check_divisor}));
  }
  if (earliest->until > m) {
    // Before the wake-up point: the close reader sleeps until it; another poller until the window is over.
    return std::min(cover, close_reader ? earliest->until - m : earliest->until + m);
  }
  if (close_reader) return std::chrono::nanoseconds(0);  // within the window: back to back
  return std::min(cover, std::max(lo, earliest->until + m));
}

}  // namespace cuasync
