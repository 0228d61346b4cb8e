// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Working across devices: peer access enabled on demand, and peer copies (`cuMemcpyPeerAsync`) between
//! tracked buffers of different devices, ordered after each buffer's conflicting uses on any stream of any device
//! (the reader's stream waits on the device for an event recorded on the writer's stream, on the other device).
//!
//! Peer access (`cuCtxEnablePeerAccess`) is enabled once per ordered pair of contexts and remembered: the first call
//! for a pair costs a driver call that maps the peer's memory (docs/scale-out.md has the measured cost), later ones
//! a lookup under a mutex. Where the devices cannot reach each other directly the copy still works: the driver then
//! goes through host memory, much slower.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <source_location>

namespace cuasync::runtime {

//! Lets `from` address `to`'s memory, once per pair for the life of the contexts: `cuCtxEnablePeerAccess`, and
//! `cuMemPoolSetAccess` on `to`'s default pool (where tracked buffers come from), which peer access does not cover. Returns false (and does nothing)
//! when the devices cannot reach each other directly, or when both are the same context. @throws cuda_error
bool enable_peer_access(context_ref from, context_ref to, std::source_location where = std::source_location::current());

//! Copies all of `src` into the start of `dst` on `s` (a stream of either buffer's device), after enabling peer
//! access from the stream's context to the other one. `src` counts as read and `dst` as written on `s`: `s` first
//! waits (on the device) for their conflicting uses elsewhere. @throws cuda_error
void copy_peer_async(stream_ref s, tracked_buffer& dst, tracked_buffer& src,
                     std::source_location where = std::source_location::current());
//! The same for untracked memory, named with its contexts. @throws cuda_error
void copy_peer_async(stream_ref s, device_span dst, context_ref dst_ctx, device_span src, context_ref src_ctx,
                     std::source_location where = std::source_location::current());

}  // namespace cuasync::runtime
