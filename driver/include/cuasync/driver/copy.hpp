// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Copies and memsets, all enqueued on a stream. Sizes and ranges are checked before anything is enqueued:
//! a zero-size copy, a copy that does not fit its destination, an overlapping device-to-device copy and a null
//! pointer are `cuda_error(CUDA_ERROR_INVALID_VALUE)`s that name the sizes and the stream.
//!
//! Host memory must stay valid (and, for a device-to-host copy, unread) until the copy completes: the call returns
//! when the copy is enqueued, not when it is done. Pageable host memory makes the copy staged and
//! partly synchronous: use pinned memory or runtime/'s staged copies.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace cuasync {

//! Host to device: copies all of `src` into the start of `dst`. @throws cuda_error
void copy_async(stream_ref s, device_span dst, std::span<const std::byte> src,
                std::source_location where = std::source_location::current());
//! Device to host: copies all of `src` into the start of `dst`. @throws cuda_error
void copy_async(stream_ref s, std::span<std::byte> dst, device_span src,
                std::source_location where = std::source_location::current());
//! Device to device (same or peer device under unified addressing): all of `src` into the start of `dst`.
//! Overlapping ranges are refused. @throws cuda_error
void copy_async(stream_ref s, device_span dst, device_span src,
                std::source_location where = std::source_location::current());
//! Between two contexts' memory (e.g. two GPUs), without needing peer access enabled. @throws cuda_error
void copy_peer_async(stream_ref s, device_span dst, context_ref dst_ctx, device_span src, context_ref src_ctx,
                     std::source_location where = std::source_location::current());
//! Sets every byte of `dst` to `value`. @throws cuda_error
void memset_async(stream_ref s, device_span dst, std::uint8_t value,
                  std::source_location where = std::source_location::current());
//! Sets every 32-bit word of `dst` (size a multiple of 4, 4-aligned) to `value`. @throws cuda_error
void memset32_async(stream_ref s, device_span dst, std::uint32_t value,
                    std::source_location where = std::source_location::current());

//! Typed conveniences for host ranges.
template <class T>
void copy_async(stream_ref s, device_span dst, std::span<const T> src,
                std::source_location where = std::source_location::current()) {
  copy_async(s, dst, std::as_bytes(src), where);
}
template <class T>
  requires(!std::is_const_v<T>)
void copy_async(stream_ref s, std::span<T> dst, device_span src,
                std::source_location where = std::source_location::current()) {
  copy_async(s, std::as_writable_bytes(dst), src, where);
}

}  // namespace cuasync
