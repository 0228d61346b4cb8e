// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `pinned_buffer`: page-locked host memory (`cuMemHostAlloc`), the only host memory that asynchronous copies
//! read and write without an extra staging copy. Allocation is slow: pool it (runtime/).

#include <cuasync/driver/context.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace cuasync {

//! Owned pinned host memory, mapped into every context's address space (portable, device-mapped). Move-only.
//! It must outlive every copy that reads or writes it.
class pinned_buffer {
 public:
  pinned_buffer() = default;
  //! Allocates `bytes` (> 0) of pinned memory. @throws cuda_error
  static pinned_buffer allocate(context_ref ctx, std::size_t bytes,
                                std::source_location where = std::source_location::current());

  pinned_buffer(pinned_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)), ctx_(o.ctx_) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept;
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  ~pinned_buffer() { free_nothrow(); }

  void* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  std::span<std::byte> bytes() const noexcept { return {static_cast<std::byte*>(ptr_), size_}; }
  template <class T>
  std::span<T> as_span() const noexcept { return {static_cast<T*>(ptr_), size_ / sizeof(T)}; }
  template <class T>
  T* data() const noexcept { return static_cast<T*>(ptr_); }
  //! The device address of this memory (equal to the host address with unified addressing).
  CUdeviceptr device_pointer(std::source_location where = std::source_location::current()) const;
  //! Gives up ownership (the caller frees it with `cuMemFreeHost`, or knows its context took it along).
  void* release() noexcept {
    size_ = 0;
    return std::exchange(ptr_, nullptr);
  }

 private:
  pinned_buffer(void* p, std::size_t n, context_ref ctx) noexcept : ptr_(p), size_(n), ctx_(ctx) {}
  void free_nothrow() noexcept;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  context_ref ctx_;
};

}  // namespace cuasync
