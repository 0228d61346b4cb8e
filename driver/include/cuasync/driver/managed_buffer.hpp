// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `managed_buffer`: unified (managed) memory with `prefetch_async` and advice (managed memory still needs its
//! prefetches and waits). Without a prefetch, first touches on the GPU page-fault and migrate page by page.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/stream.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace cuasync {

//! Where managed memory should live: a device or the host.
struct memory_location {
  CUmemLocationType type = CU_MEM_LOCATION_TYPE_DEVICE;
  int id = 0;
  static memory_location on_device(int ordinal) noexcept { return {CU_MEM_LOCATION_TYPE_DEVICE, ordinal}; }
  static memory_location on_host() noexcept { return {CU_MEM_LOCATION_TYPE_HOST, 0}; }
};

//! Owned managed memory (`cuMemAllocManaged`, attached globally). Move-only.
class managed_buffer {
 public:
  managed_buffer() = default;
  //! @throws cuda_error
  static managed_buffer allocate(context_ref ctx, std::size_t bytes,
                                 std::source_location where = std::source_location::current());

  managed_buffer(managed_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)), ctx_(o.ctx_), life_(o.life_) {}
  managed_buffer& operator=(managed_buffer&& o) noexcept;
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;
  ~managed_buffer() { free_nothrow(); }

  CUdeviceptr get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  device_span span() const noexcept { return {ptr_, size_}; }
  template <class T>
  T* data() const noexcept { return span().as<T>(); }
  template <class T>
  std::span<T> host_span() const noexcept { return {data<T>(), size_ / sizeof(T)}; }

  //! Enqueues a migration of `range` (default: all) to `location` on `s`. @throws cuda_error
  void prefetch_async(stream_ref s, memory_location location,
                      std::source_location where = std::source_location::current()) const;
  void prefetch_async(stream_ref s, memory_location location, device_span range,
                      std::source_location where = std::source_location::current()) const;
  //! `cuMemAdvise` over the whole buffer (e.g. CU_MEM_ADVISE_SET_READ_MOSTLY). @throws cuda_error
  void advise(CUmem_advise advice, memory_location location,
              std::source_location where = std::source_location::current()) const;

 private:
  managed_buffer(CUdeviceptr p, std::size_t n, context_ref ctx) noexcept;
  void free_nothrow() noexcept;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  context_ref ctx_;
  unsigned long long life_ = 0;  // the context's id at the allocation: a free after that life ended is not made
};

}  // namespace cuasync
