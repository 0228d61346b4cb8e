// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: handles. A handle is a number that is never reused (the kind in its low byte), mapped to a shared object:
// a destroyed, never-created or other-kind handle is refused with CUASYNC_ERROR_STALE_HANDLE instead of touching freed
// memory, and an object a call is using stays alive while another thread destroys its handle.
#include "abi.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace cuasync::c_api {

enum class kind : std::uint8_t {
  runtime = 1, stream, event, buffer, module, kernel, queue, host_token, image, compile_job, replay_anchor
};

const char* kind_name(kind k) noexcept;

class registry {
 public:
  static registry& instance();

  template <class T>
  std::uintptr_t add(kind k, std::shared_ptr<T> object) {
    const std::uintptr_t h = (next_.fetch_add(1, std::memory_order_relaxed) << 8) | static_cast<std::uint8_t>(k);
    std::lock_guard lock(mutex_);
    objects_.emplace(h, std::move(object));
    return h;
  }
  //! The object of `h`, or a stale-handle error naming `what` (the argument). The thread's last lookup of each kind
  //! is answered again without the lock while no handle was taken since (a call per launch looks up the same stream
  //! and kernel every time).
  template <class T>
  std::shared_ptr<T> get(const void* h, kind k, const char* what) const {
    return std::static_pointer_cast<T>(lookup(reinterpret_cast<std::uintptr_t>(h), k, what));
  }
  //! Takes the object of `h` out of the registry (its handle is stale from now on).
  template <class T>
  std::shared_ptr<T> take(const void* h, kind k, const char* what) {
    return std::static_pointer_cast<T>(find(reinterpret_cast<std::uintptr_t>(h), k, what, true));
  }
  std::size_t live() const;

 private:
  std::shared_ptr<void> find(std::uintptr_t h, kind k, const char* what, bool erase) const;
  std::shared_ptr<void> lookup(std::uintptr_t h, kind k, const char* what) const;
  mutable std::mutex mutex_;
  //! Counts the handles taken (take): a thread's cached lookup from an earlier count is not used.
  mutable std::atomic<std::uint64_t> taken_{0};
  mutable std::unordered_map<std::uintptr_t, std::shared_ptr<void>> objects_;
  std::atomic<std::uintptr_t> next_{1};
};

template <class H>
H to_handle(std::uintptr_t h) noexcept {
  return reinterpret_cast<H>(h);
}

}  // namespace cuasync::c_api
