// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Instrumented enqueues (instrumented_op.hpp): the issue as a host span, the operation's end as a timing event (handed
// to the GPU span collector, which takes its start from the stream's previous span), an NVTX range, and for the
// watchdog the driver call the thread is in.
#include <cuasync/driver/detail/instrumented_op.hpp>

#include "gpu_span_collector.hpp"

#include <cuasync/driver/detail/flight_hooks.hpp>

#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/scope.hpp>

#include <nvtx3/nvToolsExt.h>

#include <memory>

namespace cuasync::detail {

struct instrumented_op_state {
  std::uint32_t hooks = 0;
  stream_ref stream;
  trace::span host;  // the issue, on the thread's lane
  trace::span gpu;   // the operation, its times filled in by the collector
  std::uint64_t stream_id = 0;  // 0: unknown (a capturing stream)
  timing_events events;
  bool timed = false;
  bool nvtx = false;
  bool issued = false;
  std::unique_ptr<trace::host_call> watched;  // the driver call, published for the watchdog
};

namespace {
thread_local trace::category copy_category = trace::category::copy;
}  // namespace

copy_category_scope::copy_category_scope(trace::category c) noexcept : previous_(copy_category) { copy_category = c; }
copy_category_scope::~copy_category_scope() { copy_category = previous_; }
trace::category current_copy_category() noexcept { return copy_category; }

namespace {
// A stream being captured into a graph is asked nothing else and given no timing events: cuStreamGetFlags on it
// fails, and an event recorded for timing invalidates the capture (every graph captured while tracing or an NVTX tool
// was on broke; compute-sanitizer's NVTX hook showed it). Its ops run later, as the graph: no GPU span now.
bool capturing(stream_ref s) noexcept {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver().cuStreamIsCapturing(s.get(), &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}
}  // namespace

std::uint32_t stream_flags_for_trace(stream_ref s) noexcept {
  if (s.get() == nullptr || s.get() == CU_STREAM_LEGACY) return trace::flag::legacy_stream;
  if (s.get() == CU_STREAM_PER_THREAD) return 0;
  unsigned flags = 0;
  if (driver().cuStreamGetFlags(s.get(), &flags) != CUDA_SUCCESS) return 0;
  return (flags & CU_STREAM_NON_BLOCKING) ? 0 : trace::flag::blocking_stream;
}

namespace {
// The flags of the stream with id `id` (0: unknown, asked every time). A stream's flags never change and its id is
// never reused, so the thread's last answer serves its next operations on the same stream without a driver call.
std::uint32_t stream_flags_for_trace(stream_ref s, std::uint64_t id) noexcept {
  thread_local std::uint64_t last_id = 0;
  thread_local std::uint32_t last_flags = 0;
  if (id != 0 && id == last_id) return last_flags;
  const std::uint32_t flags = cuasync::detail::stream_flags_for_trace(s);
  if (id != 0) {
    last_id = id;
    last_flags = flags;
  }
  return flags;
}
}  // namespace

instrumented_op::instrumented_op(std::uint32_t hooks, stream_ref s, gpu_op op) noexcept {
  if (hooks & trace::hook::flight) {
    flight_ = flight_note(s, {.call = op.call, .name = op.name, .bytes = op.bytes, .src = op.src, .dst = op.dst,
                              .where = op.where});
    hooks &= ~trace::hook::flight;
    if (!hooks) return;
  }
  try {
    auto st = std::make_unique<instrumented_op_state>();
    st->hooks = hooks;
    st->stream = s;
    const bool captured = capturing(s);
    // The id: the GPU span's lane and queue, and the key of the stream's cached flags. A capturing stream is asked
    // nothing more (see capturing).
    unsigned long long id = 0;
    if ((hooks & trace::hook::record) && !captured && driver().cuStreamGetId(s.get(), &id) != CUDA_SUCCESS) id = 0;
    if (!captured) op.flags |= stream_flags_for_trace(s, id);
    if (op.host_side && !is_pinned(op.host_side)) {
      op.flags |= trace::flag::pageable_host;
      op.call = "cuMemcpyAsync (pageable host memory: the host waits)";
    }
    if (hooks & trace::hook::watch)
      st->watched = std::make_unique<trace::host_call>(trace::hook::watch, op.category, op.call, op.bytes, op.flags);
    if (hooks & trace::hook::nvtx) {
      nvtxRangePushA(op.name.c_str());
      st->nvtx = true;
    }
    if (hooks & trace::hook::record) {
      const int device = s.context().device_ordinal();
      st->stream_id = id;
      trace::span& g = st->gpu;
      g.lane = op.lane == trace::lane_kind::stream ? trace::lane::stream(device, id) : trace::lane::copy(device, op.lane);
      g.category = op.category;
      g.clock = trace::clock_source::gpu_events;
      g.bytes = op.bytes;
      g.stream_id = op.lane == trace::lane_kind::stream ? 0 : id;
      g.src = op.src;
      g.dst = op.dst;
      g.flags = op.flags;
      g.name = std::move(op.name);
      g.label = trace::current_label();
      g.flow = trace::new_flow_id();  // the issue and the work it issued, linked (Chrome JSON flow arrows)
      st->host = g;
      st->host.lane = trace::this_thread_lane();
      st->host.clock = trace::clock_source::host;
      st->host.stream_id = id;
      // One timing event, recorded after the operation (enqueued): its start is the stream's previous span's end or
      // this call's start (gpu_span_collector.hpp), which saves the event a record before it would cost.
      st->timed = !captured && acquire_timing_events(s.context(), st->events);
      st->host.begin_ns = trace::now_ns();
      st->gpu.begin_ns = st->host.begin_ns;
    }
    state_ = st.release();
  } catch (...) {
    // Uninstrumented: the operation itself goes ahead.
  }
}

void trace_stream_wait(stream_ref s) noexcept {
  if (capturing(s)) return;
  unsigned long long id = 0;
  if (driver().cuStreamGetId(s.get(), &id) != CUDA_SUCCESS) id = 0;
  timing_events e;
  if (!acquire_timing_events(s.context(), e)) return;
  if (driver().cuEventRecord(e.end, s.get()) == CUDA_SUCCESS)
    submit_stream_marker(s.context(), s.get(), id, e);
  else
    release_timing_events(s.context(), e);
}

void instrumented_op::issued() noexcept {
  // The call returned: its work is on the stream, or (an NCCL call in a group) accepted for the group's end.
  trace::flight::set_status(std::exchange(flight_, {}), trace::flight::status::enqueued);
  if (!state_ || state_->issued) return;
  instrumented_op_state& st = *state_;
  st.issued = true;
  if (st.hooks & trace::hook::record) {
    st.host.end_ns = trace::now_ns();
    trace::record(std::move(st.host));
  }
  if (st.nvtx) {
    nvtxRangePop();
    st.nvtx = false;
  }
  st.watched.reset();
}

void instrumented_op::enqueued() noexcept {
  trace::flight::set_status(std::exchange(flight_, {}), trace::flight::status::enqueued);
  if (!state_) return;
  instrumented_op_state& st = *state_;
  if (st.timed) {
    if (driver().cuEventRecord(st.events.end, st.stream.get()) == CUDA_SUCCESS) {
      submit_gpu_span(st.stream.context(), st.stream.get(), st.stream_id, st.events, std::move(st.gpu));
    } else {
      release_timing_events(st.stream.context(), st.events);
    }
    st.timed = false;
  }
  issued();
}

void instrumented_op::rename(std::string name, std::uint64_t bytes) noexcept {
  if (!state_) return;
  state_->gpu.name = std::move(name);
  state_->gpu.bytes = bytes;
}

instrumented_op::~instrumented_op() {
  trace::flight::set_status(flight_, trace::flight::status::failed);  // not enqueued: its call threw
  if (!state_) return;
  if (state_->timed) release_timing_events(state_->stream.context(), state_->events);
  if (state_->nvtx) nvtxRangePop();
  delete state_;
}

}  // namespace cuasync::detail
