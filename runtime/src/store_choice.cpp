// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/store_choice.hpp>

#include <algorithm>
#include <bit>

namespace cuasync::runtime {

std::size_t store_chooser::class_of(std::size_t copy_bytes) noexcept {
  const int log2 = std::bit_width(copy_bytes | 1) - 1;  // 20 for 1 MiB .. 2 MiB - 1
  return static_cast<std::size_t>(std::clamp(log2 - 20, 0, 15));
}

store_chooser::pick store_chooser::next(std::size_t copy_bytes, std::size_t chunk_bytes) noexcept {
  if (kind_ != store_kind::automatic) return {kind_ == store_kind::streaming, false};
  std::lock_guard lock(mutex_);
  size_class& c = classes_[class_of(copy_bytes)];
  if (c.decided) return {c.decided == 2, false};
  if (chunk_bytes < smallest_sample) return {false, false};
  // Alternately, until each kind has its samples handed out; then regular stores until the results are in.
  const int k = c.issued[0] <= c.issued[1] ? 0 : 1;
  if (c.issued[k] >= samples_per_kind) return {false, false};
  ++c.issued[k];
  return {k == 1, true};
}

void store_chooser::report(std::size_t copy_bytes, bool streaming, std::size_t bytes,
                           std::chrono::nanoseconds t) noexcept {
  std::lock_guard lock(mutex_);
  size_class& c = classes_[class_of(copy_bytes)];
  if (c.decided) return;
  const int k = streaming ? 1 : 0;
  ++c.reported[k];
  c.ns[k] += static_cast<double>(t.count());
  c.bytes[k] += static_cast<double>(bytes);
  if (c.reported[0] < samples_per_kind || c.reported[1] < samples_per_kind) return;
  // Time per byte; a tie keeps regular stores (they leave the destination in the cache for whoever reads it next).
  const double regular = c.ns[0] / c.bytes[0], non_temporal = c.ns[1] / c.bytes[1];
  c.decided = non_temporal < regular ? 2 : 1;
}

bool store_chooser::streaming(std::size_t copy_bytes) const noexcept {
  if (kind_ != store_kind::automatic) return kind_ == store_kind::streaming;
  return decision(copy_bytes) == 2;
}

int store_chooser::decision(std::size_t copy_bytes) const noexcept {
  std::lock_guard lock(mutex_);
  return classes_[class_of(copy_bytes)].decided;
}

}  // namespace cuasync::runtime
