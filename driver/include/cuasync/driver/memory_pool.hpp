// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Memory pools: stream-ordered allocation (`cuMemAllocFromPoolAsync` / `cuMemFreeAsync`, ≈1 µs against
//! ≈60 µs for `cuMemAlloc` + free on the H200). `memory_pool_ref` for the device's default pool or a
//! foreign pool, `memory_pool` for created pools, `pool_buffer` for an allocation freed in stream order.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/driver/stream.hpp>

#include <cstddef>
#include <utility>

namespace cuasync {

//! A memory pool this object does not own.
class memory_pool_ref {
 public:
  memory_pool_ref() = default;
  memory_pool_ref(CUmemoryPool pool, context_ref ctx) noexcept : pool_(pool), ctx_(ctx) {}
  //! The device's default pool (what `cuMemAllocAsync` uses). @throws cuda_error if pools are unsupported.
  static memory_pool_ref device_default(context_ref ctx, std::source_location where = std::source_location::current());

  CUmemoryPool get() const noexcept { return pool_; }
  context_ref context() const noexcept { return ctx_; }

  //! Enqueues an allocation of `bytes` (> 0) on `s`: the memory may be used by work on `s` submitted after this
  //! call (other streams must wait on an event first). Returns the address at once. @throws cuda_error
  CUdeviceptr allocate_async(stream_ref s, std::size_t bytes,
                             std::source_location where = std::source_location::current()) const {
    CUdeviceptr p = 0;
    if (!s) [[unlikely]] detail::throw_invalid("cuasync::memory_pool_ref::allocate_async", "empty stream", where);
    if (bytes == 0) [[unlikely]]
      detail::throw_invalid("cuasync::memory_pool_ref::allocate_async", "zero-byte allocation on " + s.describe(),
                            where);
    trace::host_call hooked(trace::category::alloc, "cuMemAllocFromPoolAsync", bytes, trace::flag::stream_ordered,
                            &where);
    if (CUresult r = detail::driver().cuMemAllocFromPoolAsync(&p, bytes, pool_, s.get()); r != CUDA_SUCCESS)
      [[unlikely]]
      detail::throw_cu(r, "cuMemAllocFromPoolAsync", std::to_string(bytes) + " bytes on " + s.describe(), where);
    return p;
  }
  //! Enqueues the return of `p` to its pool after the work submitted to `s` so far. Work on other streams that
  //! still uses `p` must be made to complete first (record an event there and `s.wait()` it). @throws cuda_error
  static void free_async(stream_ref s, CUdeviceptr p, std::source_location where = std::source_location::current()) {
    if (!s) [[unlikely]] detail::throw_invalid("cuasync::memory_pool_ref::free_async", "empty stream", where);
    trace::host_call hooked(trace::category::alloc, "cuMemFreeAsync", 0, trace::flag::stream_ordered, &where);
    if (CUresult r = detail::driver().cuMemFreeAsync(p, s.get()); r != CUDA_SUCCESS) [[unlikely]]
      detail::throw_cu(r, "cuMemFreeAsync", "pointer " + detail::handle_string(reinterpret_cast<void*>(p)) + " on " +
                                                s.describe(),
                       where);
  }

  //! Memory above this many bytes is returned to the OS at synchronisation points; UINT64_MAX keeps it all
  //! (no re-allocation cost). @throws cuda_error
  void set_release_threshold(std::uint64_t bytes, std::source_location where = std::source_location::current()) const;
  //! Lets device `peer` read and write this pool's allocations (`cuMemPoolSetAccess`): pool memory does not follow
  //! `cuCtxEnablePeerAccess`, so peer copies and kernels on `peer` need this to reach it directly. @throws cuda_error
  void grant_access(int peer, std::source_location where = std::source_location::current()) const;
  std::uint64_t release_threshold(std::source_location where = std::source_location::current()) const;
  //! Bytes currently reserved from the device / in use by allocations.
  std::uint64_t reserved_bytes(std::source_location where = std::source_location::current()) const;
  std::uint64_t used_bytes(std::source_location where = std::source_location::current()) const;
  //! Releases reserved memory down to `keep_bytes`.
  void trim_to(std::size_t keep_bytes, std::source_location where = std::source_location::current()) const;

 protected:
  CUmemoryPool pool_ = nullptr;
  context_ref ctx_;
};

//! Options for `memory_pool::create`.
struct memory_pool_options {
  std::size_t max_size = 0;               //!< 0 = no limit but the device's memory
  std::uint64_t release_threshold = 0;    //!< see `set_release_threshold`
};

//! An owned memory pool. Move-only.
class memory_pool : public memory_pool_ref {
 public:
  memory_pool() = default;
  //! Creates a pool of device memory on `ctx`'s device. @throws cuda_error
  static memory_pool create(context_ref ctx, memory_pool_options options = {},
                            std::source_location where = std::source_location::current());
  memory_pool(memory_pool&& o) noexcept : memory_pool_ref(std::exchange(o.pool_, nullptr), o.ctx_) {}
  memory_pool& operator=(memory_pool&& o) noexcept;
  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  ~memory_pool();
  CUmemoryPool release() noexcept { return std::exchange(pool_, nullptr); }
};

//! A stream-ordered allocation that frees itself on its stream (`free_stream()`, the allocating stream unless
//! changed) when destroyed. Move-only.
class pool_buffer {
 public:
  pool_buffer() = default;
  //! Enqueues the allocation on `s`. @throws cuda_error
  static pool_buffer allocate_async(memory_pool_ref pool, stream_ref s, std::size_t bytes,
                                    std::source_location where = std::source_location::current()) {
    return pool_buffer(pool.allocate_async(s, bytes, where), bytes, s);
  }
  pool_buffer(pool_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)), stream_(o.stream_) {}
  pool_buffer& operator=(pool_buffer&& o) noexcept {
    if (this != &o) {
      free_nothrow();
      ptr_ = std::exchange(o.ptr_, 0);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
    }
    return *this;
  }
  pool_buffer(const pool_buffer&) = delete;
  pool_buffer& operator=(const pool_buffer&) = delete;
  ~pool_buffer() { free_nothrow(); }

  CUdeviceptr get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  device_span span() const noexcept { return {ptr_, size_}; }
  template <class T>
  T* data() const noexcept { return span().as<T>(); }
  stream_ref free_stream() const noexcept { return stream_; }
  //! The stream whose order the free follows; it must be ordered after every use of the memory.
  void set_free_stream(stream_ref s) noexcept { stream_ = s; }
  //! Enqueues the free now. @throws cuda_error (the buffer still owns the memory then: its destructor frees it)
  void free_async(std::source_location where = std::source_location::current()) {
    if (ptr_) memory_pool_ref::free_async(stream_, ptr_, where);
    ptr_ = 0;
    size_ = 0;
  }
  CUdeviceptr release() noexcept { size_ = 0; return std::exchange(ptr_, 0); }

 private:
  pool_buffer(CUdeviceptr p, std::size_t n, stream_ref s) noexcept : ptr_(p), size_(n), stream_(s) {}
  void free_nothrow() noexcept;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  stream_ref stream_;
};

}  // namespace cuasync
