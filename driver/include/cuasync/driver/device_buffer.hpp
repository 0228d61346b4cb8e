// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `device_buffer`: device memory from `cuMemAlloc`. Allocation and freeing synchronise the device and cost
//! ~60 µs: use `memory_pool` (stream-ordered, ~1 µs) on hot paths.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device_span.hpp>

#include <utility>

namespace cuasync {

//! Owned device memory. Move-only. Freeing (`cuMemFree`) waits until the device is idle: never destroy one while
//! work that you are holding back (a gate, an event another thread records later) is still queued.
class device_buffer {
 public:
  device_buffer() = default;
  //! Allocates `bytes` (> 0) in `ctx`. @throws cuda_error (CUDA_ERROR_OUT_OF_MEMORY names the size and the device)
  static device_buffer allocate(context_ref ctx, std::size_t bytes,
                                std::source_location where = std::source_location::current());
  //! Takes ownership of memory from `cuMemAlloc` in `ctx`.
  static device_buffer from_native_handle(CUdeviceptr p, std::size_t bytes, context_ref ctx) noexcept {
    return device_buffer(p, bytes, ctx);
  }

  device_buffer(device_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)), ctx_(o.ctx_), life_(o.life_) {}
  device_buffer& operator=(device_buffer&& o) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { free_nothrow(); }

  CUdeviceptr get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  context_ref context() const noexcept { return ctx_; }
  explicit operator bool() const noexcept { return ptr_ != 0; }
  device_span span() const noexcept { return {ptr_, size_}; }
  device_span subspan(std::size_t offset, std::size_t count,
                      std::source_location where = std::source_location::current()) const {
    return span().subspan(offset, count, where);
  }
  template <class T>
  T* data() const noexcept { return span().as<T>(); }
  //! Gives up ownership.
  CUdeviceptr release() noexcept { size_ = 0; return std::exchange(ptr_, 0); }

 private:
  device_buffer(CUdeviceptr p, std::size_t n, context_ref ctx) noexcept;
  void free_nothrow() noexcept;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  context_ref ctx_;
  unsigned long long life_ = 0;  // the context's id at the allocation: a free after that life ended is not made
};

}  // namespace cuasync
