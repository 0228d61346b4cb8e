// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what an awaited copy does, decided in the call (sizes checked, host memory classified) and carried out
// once admitted: an enqueue for pinned and device memory, a staged task for pageable host memory.
#include <cuasync/async_io/completion_service.hpp>

#include <cuasync/driver/device_span.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <cstddef>
#include <memory>
#include <source_location>
#include <span>
#include <type_traits>

namespace cuasync::detail {

//! One side of a copy, as the caller named it.
struct copy_end {
  std::byte* host = nullptr;  //!< host memory (a span, or a pinned block's bytes); null for device memory
  CUdeviceptr device = 0;     //!< device memory (a device_span, or a tracked buffer's)
  std::size_t size = 0;
  bool writable = false;                      //!< may be a destination
  runtime::tracked_buffer* tracked = nullptr;  //!< its uses are tracked (the copy declares its own)
  runtime::pinned_block* block = nullptr;      //!< a pooled pinned block (not reused before the copy completes)
};
inline copy_end endpoint(std::span<const std::byte> b) noexcept {
  return {const_cast<std::byte*>(b.data()), 0, b.size(), false};
}
inline copy_end endpoint(std::span<std::byte> b) noexcept { return {b.data(), 0, b.size(), true}; }
//! Typed host memory (`std::span<const float>`, a `std::vector<int>`'s span): its bytes.
template <class T>
  requires(std::is_trivially_copyable_v<T> && !std::is_same_v<std::remove_const_t<T>, std::byte>)
copy_end endpoint(std::span<T> b) noexcept {
  if constexpr (std::is_const_v<T>)
    return endpoint(std::as_bytes(b));
  else
    return endpoint(std::as_writable_bytes(b));
}
inline copy_end endpoint(device_span d) noexcept { return {nullptr, d.ptr, d.size, true}; }
inline copy_end endpoint(runtime::tracked_buffer& b) noexcept { return {nullptr, b.get(), b.size(), true, &b}; }
inline copy_end endpoint(runtime::pinned_block& b) noexcept {
  return {b.data<std::byte>(), 0, b.size(), true, nullptr, &b};
}

//! The copy, ready to start. Copyable (it may wait for admission, stored).
struct copy_work {
  copy_end dst, src;
  std::size_t bytes = 0;                        //!< src.size
  runtime::staged_copier* staging = nullptr;     //!< set when the host side is pageable: the copy is staged
  std::shared_ptr<runtime::device_runtime> rt;  //!< keeps `staging` alive
  std::source_location where;

  //! Enqueues the copy (pinned or device memory): tracked uses first, the copy, then pinned blocks' uses.
  void operator()(stream_ref s) const;
  //! Starts the staged copy (pageable host memory), holding the stream until its last chunk is enqueued.
  void operator()(stream_ref s, admission_ticket ticket, std::shared_ptr<task_done> done) const;
};

//! Checks the copy and decides how it runs. `rt`: the runtime whose staging to use for pageable memory (null: the
//! process runtime of the stream's device, when the stream is on its primary context). @throws cuda_error
copy_work make_copy_work(runtime::device_runtime* rt, stream_ref s, const copy_end& dst, const copy_end& src,
                         std::source_location where);

}  // namespace cuasync::detail
