// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! What the driver's hooks do when instrumentation is on (trace/hooks.hpp): an operation enqueued on a stream
//! is bracketed by two timing events (its GPU span, converted to the host clock by the collector), its issue is a host
//! span on the calling thread's lane, and NVTX sees a range. Out of line: the hooks reach it only after
//! `trace::active_hooks()` said something is on, so the plain path pays one load and a branch.

#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/span.hpp>

#include <cstdint>
#include <source_location>
#include <string>

namespace cuasync::detail {

//! The GPU span an operation will have.
struct gpu_op {
  trace::category category = trace::category::launch;
  //! stream: the span goes on the stream's lane; a copy direction: on that copy lane of the stream's device.
  trace::lane_kind lane = trace::lane_kind::stream;
  const char* call = "";  //!< the driver entry point (a string literal): what the watchdog names
  std::string name;       //!< the span's name (the kernel's, "H2D copy", ...)
  std::uint64_t bytes = 0;
  std::uint64_t src = 0;
  std::uint64_t dst = 0;
  std::uint32_t flags = 0;
  //! The host side of a copy (checked for page-locked memory: trace::flag::pageable_host when it is not).
  const void* host_side = nullptr;
  std::source_location where{};  //!< the issuing call site, for the flight recorder (default: unknown)
};

struct instrumented_op_state;

//! Brackets one enqueue: construct before it, call `enqueued()` after it succeeded (an operation that threw records
//! no GPU span, and the flight recorder marks it refused). Never throws; instrumentation that fails (no events left,
//! a driver error) is skipped. With the flight bit it also records the operation in its stream's flight ring.
//!
//! Work that reaches the stream later than its call returns (an NCCL call inside a group is launched by
//! ncclGroupEnd) calls `issued()` when the call returns (the issue span ends, the NVTX range and the watchdog's slot
//! close) and `enqueued()` once the work is on the stream.
class instrumented_op {
 public:
  instrumented_op(std::uint32_t hooks, stream_ref s, gpu_op op) noexcept;
  ~instrumented_op();
  void issued() noexcept;
  void enqueued() noexcept;
  //! Renames the GPU span (before `enqueued()`): grouped calls on one stream become one span.
  void rename(std::string name, std::uint64_t bytes) noexcept;
  instrumented_op(const instrumented_op&) = delete;
  instrumented_op& operator=(const instrumented_op&) = delete;

 private:
  instrumented_op_state* state_ = nullptr;
  trace::flight::mark flight_;  // until enqueued()
};

//! The category the calling thread's next copies are recorded as (the staged copier's DMA is a staged_copy_chunk,
//! not a plain copy): set by copy_category_scope for its lifetime.
class copy_category_scope {
 public:
  explicit copy_category_scope(trace::category c) noexcept;
  ~copy_category_scope();
  copy_category_scope(const copy_category_scope&) = delete;
  copy_category_scope& operator=(const copy_category_scope&) = delete;

 private:
  trace::category previous_;
};
//! The category copies are recorded as on this thread now (`copy` unless a copy_category_scope says otherwise).
trace::category current_copy_category() noexcept;

//! After `s` was made to wait for another stream's work (cuStreamWaitEvent), with recording on: marks when the wait
//! ends, so that the next GPU span on `s` starts no earlier (a span's start is its stream's previous span's end, or
//! its call's start). Never throws; nothing on a capturing stream.
void trace_stream_wait(stream_ref s) noexcept;

//! Flags of a stream for the diagnostics: legacy_stream, blocking_stream, or 0.
std::uint32_t stream_flags_for_trace(stream_ref s) noexcept;

}  // namespace cuasync::detail
