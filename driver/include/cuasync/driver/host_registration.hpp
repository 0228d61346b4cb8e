// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `host_registration`: pins existing host memory (`cuMemHostRegister`) for as long as the object lives.
//! Registration is expensive (≈10–12 ms for 256 MiB on the H200): do it once for long-lived buffers, never per copy.

#include <cuasync/driver/context.hpp>

#include <cstddef>
#include <utility>

namespace cuasync {

//! RAII over `cuMemHostRegister` / `cuMemHostUnregister`. Move-only. The memory must outlive the registration and
//! every copy that uses it.
class host_registration {
 public:
  host_registration() = default;
  //! Registers `[ptr, ptr + bytes)` (portable and device-mapped). @throws cuda_error (e.g. already registered)
  static host_registration register_memory(context_ref ctx, void* ptr, std::size_t bytes,
                                           std::source_location where = std::source_location::current());

  host_registration(host_registration&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)), ctx_(o.ctx_) {}
  host_registration& operator=(host_registration&& o) noexcept;
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  ~host_registration() { unregister_nothrow(); }

  void* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

 private:
  host_registration(void* p, std::size_t n, context_ref ctx) noexcept : ptr_(p), size_(n), ctx_(ctx) {}
  void unregister_nothrow() noexcept;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  context_ref ctx_;
};

}  // namespace cuasync
