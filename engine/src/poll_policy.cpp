#include <cuasync/engine/poll_policy.hpp>

#include <algorithm>
#include <cstdlib>

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
  return name ? from_name(name) : balanced();
}

std::chrono::nanoseconds poll_policy::next_delay(std::chrono::nanoseconds since_activity) const noexcept {
  if (since_activity < spin) return std::chrono::nanoseconds(0);
  const std::chrono::nanoseconds lo = min_sleep.count() > 0 ? min_sleep : std::chrono::nanoseconds(1);
  const std::chrono::nanoseconds hi = std::max(lo, max_sleep);
  const std::chrono::nanoseconds d = since_activity / std::max(1u, backoff_divisor);
  return std::clamp(d, lo, hi);
}

}  // namespace cuasync
