// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/stream_pool.hpp>

namespace cuasync::runtime {

stream_pool::stream_pool(context_ref ctx, std::size_t per_priority, std::source_location where,
                         std::shared_ptr<const void> context_keeper)
    : ctx_(ctx), idle_(std::make_shared<idle_streams>()) {
  idle_->context_keeper = std::move(context_keeper);
  // The driver's range is [greatest, least] with least = the default (0): "normal" streams keep the default, so they
  // do not pre-empt other libraries' streams; "low" cannot go below it; "high" takes the greatest.
  auto [least, greatest] = ctx.stream_priority_range(where);
  values_[0] = greatest;
  values_[1] = least;
  values_[2] = least;
  for (int p = 0; p < 3; ++p)
    for (std::size_t i = 0; i < std::max<std::size_t>(per_priority, 1); ++i)
      shared_[p].push_back(stream::create(ctx, {.non_blocking = true, .priority = values_[p]}, where));
}

stream_ref stream_pool::next(priority p) noexcept {
  const int i = static_cast<int>(p);
  return shared_[i][cursor_[i].fetch_add(1, std::memory_order_relaxed) % shared_[i].size()];
}

stream_pool::lease stream_pool::borrow(priority p, std::source_location where) {
  const int i = static_cast<int>(p);
  {
    std::lock_guard lock(idle_->mutex);
    if (!idle_->by_level[i].empty()) {
      stream s = std::move(idle_->by_level[i].back());
      idle_->by_level[i].pop_back();
      return lease(idle_, std::move(s), i);
    }
  }
  return lease(idle_, stream::create(ctx_, {.non_blocking = true, .priority = values_[i]}, where), i);
}

void stream_pool::lease::give_back() noexcept {
  if (!idle_ || !stream_) return;
  try {
    std::lock_guard lock(idle_->mutex);
    idle_->by_level[level_].push_back(std::move(stream_));
  } catch (...) {
    // No room in the idle list: the stream is destroyed with the lease instead.
  }
}

stream_pool::lease& stream_pool::lease::operator=(lease&& o) noexcept {
  if (this != &o) {
    give_back();
    stream_ = std::move(o.stream_);
    idle_ = std::move(o.idle_);
    level_ = o.level_;
  }
  return *this;
}

stream_pool::lease::~lease() { give_back(); }

}  // namespace cuasync::runtime
