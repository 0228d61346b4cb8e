#pragma once
// Turns pairs of timing events into GPU spans on the host clock. One thread for the process, started with the first
// GPU span: it queries the head of each stream's queue (operations on one stream complete in order), reads the
// elapsed times against a reference event of the context, and records the span. The reference is recorded on an idle
// stream of the collector's own and watched in a tight loop, so its host time is known within microseconds; a new
// one replaces it every two seconds (cuEventElapsedTime's float milliseconds lose precision with distance).
#include <cuasync/driver/context.hpp>
#include <cuasync/trace/span.hpp>

#include <cuda.h>

namespace cuasync::detail {

struct timing_events {
  CUevent begin = nullptr;
  CUevent end = nullptr;
  const void* reference = nullptr;  // the collector's reference these are measured against (opaque)
};

//! Timing events for an operation on a stream of `ctx`, recorded against the context's current reference. False
//! when none can be had (the context's events cannot be created): the operation goes unmeasured.
bool acquire_timing_events(context_ref ctx, timing_events& out) noexcept;
//! Gives back events whose operation was not enqueued.
void release_timing_events(context_ref ctx, const timing_events& e) noexcept;
//! Queues a GPU span: `e.end` was recorded on `stream` after the operation, `e.begin` before it. `s` is complete
//! but for its times, which the collector fills in when `e.end` has completed.
void submit_gpu_span(context_ref ctx, CUstream stream, const timing_events& e, trace::span s) noexcept;

//! Before a context is released (it may be destroyed): its queued spans are waited for and recorded, and the
//! collector's objects on it destroyed. Nothing when no GPU span was ever traced.
void forget_context_for_trace(CUcontext ctx) noexcept;

}  // namespace cuasync::detail
