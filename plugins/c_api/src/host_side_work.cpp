// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "host_side_work.hpp"

#include <utility>

namespace cuasync::c_api {

std::uint64_t host_side_work::start() {
  std::lock_guard lock(mutex_);
  const std::uint64_t piece = next_++;
  running_.insert(piece);
  return piece;
}

void host_side_work::finish(std::uint64_t piece) noexcept {
  std::vector<parked> ready;
  {
    std::lock_guard lock(mutex_);
    running_.erase(piece);
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (covered_locked(it->mark)) {
        try {
          ready.push_back(std::move(*it));
        } catch (...) {
          it->to(it->ec);  // no room to move it out: deliver under the lock (a delivery never calls back here)
        }
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (parked& p : ready) p.to(p.ec);
}

std::uint64_t host_side_work::mark() {
  std::lock_guard lock(mutex_);
  return running_.empty() ? 0 : next_;
}

void host_side_work::deliver_after(std::uint64_t mark, delivery to, std::error_code ec) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!covered_locked(mark)) {
      try {
        parked_.push_back({mark, std::move(to), ec});
        return;
      } catch (...) {
        // No memory to park it: delivered now rather than lost.
      }
    }
  }
  to(ec);
}

void host_side_work::hold() {
  std::lock_guard lock(mutex_);
  ++holds_;
}

void host_side_work::let_go() noexcept {
  std::vector<std::shared_ptr<void>> released;
  {
    std::lock_guard lock(mutex_);
    if (--holds_ == 0) released.swap(deferred_);
  }
  // `released` goes here: buffers' stream-ordered frees, now after the last chunk.
}

bool host_side_work::held() const {
  std::lock_guard lock(mutex_);
  return holds_ > 0;
}

bool host_side_work::defer_while_held(std::shared_ptr<void>& what) {
  std::lock_guard lock(mutex_);
  if (holds_ == 0) return false;
  deferred_.push_back(std::move(what));
  return true;
}

}  // namespace cuasync::c_api
