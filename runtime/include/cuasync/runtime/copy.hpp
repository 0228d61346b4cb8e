#pragma once
//! @file Copies through the runtime: pageable host memory is staged (seed §8), tracked buffers get their cross-stream
//! waits (seed §10), and pinned blocks are kept from reuse until the copy that uses them completes (seed §12.1).

#include <cuasync/driver/copy.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

namespace cuasync::runtime {

//! How runtime copies treat pageable host memory.
struct copy_options {
  bool stage_pageable = true;  //!< false: hand pageable memory to the driver (slow, partly synchronous)
};

//! Host to device on `s`. Pinned `src` (allocated pinned or registered) is copied asynchronously; pageable `src` of
//! at least `staging_threshold_bytes` goes through the staging ring (host-blocking until `src` is staged, see
//! `staged_copier`); smaller pageable copies go to the driver. Every pageable copy is counted in `rt.stats()`.
//! @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, device_span dst, std::span<const std::byte> src,
                copy_options options = {}, std::source_location where = std::source_location::current());
//! Device to host on `s`. For pinned `dst` asynchronous; for pageable `dst` host-blocking until it holds the data.
//! @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, std::span<std::byte> dst, device_span src,
                copy_options options = {}, std::source_location where = std::source_location::current());

//! Into a tracked buffer: `s` first waits for the buffer's other users. @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, tracked_buffer& dst, std::span<const std::byte> src,
                copy_options options = {}, std::source_location where = std::source_location::current());
//! Out of a tracked buffer: `s` first waits for the buffer's last writer. @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, std::span<std::byte> dst, tracked_buffer& src,
                copy_options options = {}, std::source_location where = std::source_location::current());
//! Between tracked buffers (both record the use: `src` as a read). @throws cuda_error
void copy_async(stream_ref s, tracked_buffer& dst, tracked_buffer& src,
                std::source_location where = std::source_location::current());

//! From a pinned block into a tracked buffer; the block is not reused before the copy completes. @throws cuda_error
void copy_async(stream_ref s, tracked_buffer& dst, pinned_block& src,
                std::source_location where = std::source_location::current());
//! From a tracked buffer into a pinned block; the block is not reused before the copy completes. @throws cuda_error
void copy_async(stream_ref s, pinned_block& dst, tracked_buffer& src,
                std::source_location where = std::source_location::current());

}  // namespace cuasync::runtime
