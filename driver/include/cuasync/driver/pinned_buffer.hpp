// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `pinned_buffer`: page-locked host memory (`cuMemHostAlloc`, or host memory registered with `cuMemHostRegister`),
//! the only host memory that asynchronous copies read and write without an extra staging copy. Allocation is slow:
//! pool it (runtime/).

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
  //! The same, made another way: host memory mapped for it alone and touched on the calling thread (not inherited
  //! by a forked child, as the driver's pinned memory; from 2 MiB, 2 MiB-aligned and advised as transparent huge
  //! pages unless `CUASYNC_PINNED_HUGE_PAGES=0`), then registered (portable, device-mapped). A `cuMemHostAlloc`
  //! keeps every other thread's driver calls out for its whole length (~0.5 ms per MiB on the H100); here only the
  //! registration does, ~10x shorter per MiB (128 MiB: 4-10 ms against 43-68). Freed by `cuMemHostUnregister`, then
  //! its mapping is removed. @throws cuda_error
  static pinned_buffer allocate_registered(context_ref ctx, std::size_t bytes,
                                           std::source_location where = std::source_location::current());

  pinned_buffer(pinned_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        ctx_(o.ctx_),
        life_(o.life_),
        registered_(std::exchange(o.registered_, false)) {}
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
  //! Whether it was made by `allocate_registered`.
  bool registered() const noexcept { return registered_; }
  //! Gives up ownership (the caller frees it with `cuMemFreeHost`, or knows its context took it along; a registered
  //! one: `cuMemHostUnregister`, then `std::free`).
  void* release() noexcept {
    size_ = 0;
    registered_ = false;
    return std::exchange(ptr_, nullptr);
  }

 private:
  pinned_buffer(void* p, std::size_t n, context_ref ctx, bool registered) noexcept;
  void free_nothrow() noexcept;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  context_ref ctx_;
  unsigned long long life_ = 0;  // the context's id at the allocation: a free after that life ended is not made
  bool registered_ = false;
};

}  // namespace cuasync
