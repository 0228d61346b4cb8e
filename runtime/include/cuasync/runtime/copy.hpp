// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Copies through the runtime: pageable host memory is staged (the driver's own path is slow and synchronous), tracked
//! buffers get their cross-stream waits, and pinned blocks are kept from reuse until the copy that uses them completes
//! (a host buffer is in use until then).

#include <cuasync/driver/copy.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

namespace cuasync::runtime {

//! How runtime copies treat pageable host memory.
struct copy_options {
  bool stage_pageable = true;  //!< false: hand pageable memory to the driver (slow, partly synchronous)
};

//! Host to device on `s`, blocking for pageable memory (its name says so). Pinned `src` (allocated pinned or
//! registered) is copied asynchronously; pageable `src` goes where `rt.options().pageable` says for a blocking
//! caller (pageable_copy.hpp): from `driver_below_bytes` on through the staging ring, the call sleeping until `src`
//! is staged (then `src` may be reused; see `staged_copier`); smaller ones to the driver, which copies them into
//! its own buffer in the call. Every pageable copy is counted in `rt.stats()`. @throws cuda_error
void copy_blocking(device_runtime& rt, stream_ref s, device_span dst, std::span<const std::byte> src,
                   copy_options options = {}, std::source_location where = std::source_location::current());
//! Device to host on `s`. For pinned `dst` asynchronous; for pageable `dst` the call sleeps until it holds the data
//! (as the driver's own pageable copy does). @throws cuda_error
void copy_blocking(device_runtime& rt, stream_ref s, std::span<std::byte> dst, device_span src,
                   copy_options options = {}, std::source_location where = std::source_location::current());
//! `copy_blocking` under its older name: it blocks for pageable memory. Asynchronous pageable copies are
//! `co_await async_copy(rt, ...)` (async_io) and the C ABI's `copy`. @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, device_span dst, std::span<const std::byte> src,
                copy_options options = {}, std::source_location where = std::source_location::current());
//! `copy_blocking` under its older name (see above). @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, std::span<std::byte> dst, device_span src,
                copy_options options = {}, std::source_location where = std::source_location::current());

//! Into a tracked buffer: `s` first waits for the buffer's other users. Blocking for pageable `src`, as
//! `copy_blocking`. @throws cuda_error
void copy_async(device_runtime& rt, stream_ref s, tracked_buffer& dst, std::span<const std::byte> src,
                copy_options options = {}, std::source_location where = std::source_location::current());
//! Out of a tracked buffer: `s` first waits for the buffer's last writer. Blocking for pageable `dst`, as
//! `copy_blocking`. @throws cuda_error
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
