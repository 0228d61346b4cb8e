// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/stream_gate.hpp>

#include <atomic>

namespace cuasync::runtime {

namespace {
// The number after `n`: 0 is skipped (it answers "not supported").
std::uint32_t after(std::uint32_t n) { return n + 1 == 0 ? 1 : n + 1; }
}  // namespace

bool stream_gate::ready(const std::shared_ptr<pinned_pool>& pool) noexcept {
  std::lock_guard lock(mutex_);
  if (unsupported_) return false;
  if (word_) return true;
  if (pinned_block b = pool->try_allocate(sizeof(std::uint32_t))) {
    word_device_ = reinterpret_cast<CUdeviceptr>(b.get());  // mapped pinned memory: the same address (unified)
    *b.data<std::uint32_t>() = released_;
    word_ = std::move(b);
    pool->warm_async(sizeof(std::uint32_t));  // the next stream's word, in the background
    return true;
  }
  if (!requested_) {
    requested_ = true;
    try {
      // Allocated there and dropped at once: idle in the pool, the next copy's try_allocate takes it.
      pool->reserve_async({sizeof(std::uint32_t)});
    } catch (...) {
      requested_ = false;
    }
  }
  return false;
}

std::uint32_t stream_gate::enqueue_wait(stream_ref s) {
  std::lock_guard lock(mutex_);
  if (unsupported_) return 0;
  const std::uint32_t n = after(issued_);  // the comparison is cyclic: numbers may wrap
  CUresult r = detail::driver().cuStreamWaitValue32(s.get(), word_device_, n, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    unsupported_ = true;
    return 0;
  }
  if (r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuStreamWaitValue32", "the wait of a pageable copy on " + s.describe(),
                     std::source_location::current());
  issued_ = n;
  return n;
}

void stream_gate::release(std::uint32_t n) noexcept {
  std::lock_guard lock(mutex_);
  try {
    if (n != after(released_)) {
      early_.insert(n);
      return;
    }
  } catch (...) {
    // No memory to remember it: release it now (its stream may pass an earlier copy's wait; better than a hang).
  }
  released_ = n;
  for (auto it = early_.find(after(released_)); it != early_.end(); it = early_.find(after(released_))) {
    released_ = *it;
    early_.erase(it);
  }
  // The stream's front end reads the word: a release store after the block's bytes (the fill happened before).
  std::atomic_ref(*word_.data<std::uint32_t>()).store(released_, std::memory_order_release);
}

void stream_gate::retire(stream_ref s) noexcept {
  std::lock_guard lock(mutex_);
  if (!word_) return;
  try {
    word_.record_use(s);
  } catch (...) {
    // The stream's work could not be marked: its waits ran (the context is gone) or will fail with it.
  }
  word_ = {};
}

}  // namespace cuasync::runtime
