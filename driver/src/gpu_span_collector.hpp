// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Turns timing events into GPU spans on the host clock. Passes run while spans are in flight — on the engine's poller
// thread where the engine is linked (gpu_span_pump.hpp), else on one thread of the collector's, started with the
// first GPU span: each pass queries the head of each stream's queue (operations on one stream complete in order), reads the elapsed time of
// the operation's end against a reference event of the context, and records the span. One event per operation, after
// it: its start is the previous traced operation's end on the same stream, or the host time its call began when that
// is later (the stream was idle). The reference is recorded on an idle stream of the collector's own and watched in a
// tight loop, so its host time is known within microseconds; a new one replaces it every two seconds
// (cuEventElapsedTime's float milliseconds lose precision with distance).
#include <cuasync/driver/context.hpp>
#include <cuasync/trace/span.hpp>

#include <cuda.h>

#include <cstdint>

namespace cuasync::detail {

struct timing_events {
  CUevent end = nullptr;  // recorded after the operation
  const void* reference = nullptr;  // the collector's reference these are measured against (opaque)
};

//! The timing event for an operation on a stream of `ctx`, measured against the context's current reference. False
//! when none can be had (the context's events cannot be created): the operation goes unmeasured.
bool acquire_timing_events(context_ref ctx, timing_events& out) noexcept;
//! Gives back an event whose operation was not enqueued.
void release_timing_events(context_ref ctx, const timing_events& e) noexcept;
//! Queues a GPU span: `e.end` was recorded on `stream` (whose id is `stream_id`, 0 when unknown: then the handle
//! keys its queue) after the operation. `s` is complete but for its times: `s.begin_ns` is the host time the
//! operation's call began (the earliest it can have started); the collector fills in both when `e.end` has completed.
void submit_gpu_span(context_ref ctx, CUstream stream, std::uint64_t stream_id, const timing_events& e,
                     trace::span s) noexcept;

//! Queues a marker: `e.end` was recorded on `stream` after a wait for another stream's work (cuStreamWaitEvent).
//! It records nothing; its time is the start, at the earliest, of the stream's next span (which would otherwise begin
//! at its call, while the stream still waited).
void submit_stream_marker(context_ref ctx, CUstream stream, std::uint64_t stream_id, const timing_events& e) noexcept;

//! Before a context is released (it may be destroyed): its queued spans are waited for and recorded, and the
//! collector's objects on it destroyed. Nothing when no GPU span was ever traced.
void forget_context_for_trace(CUcontext ctx) noexcept;

}  // namespace cuasync::detail
