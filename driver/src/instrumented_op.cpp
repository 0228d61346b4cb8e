// Instrumented enqueues (instrumented_op.hpp): the issue as a host span, the operation between two timing events
// (handed to the GPU span collector), an NVTX range, and for the watchdog the driver call the thread is in.
#include <cuasync/driver/detail/instrumented_op.hpp>

#include "gpu_span_collector.hpp"

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

instrumented_op::instrumented_op(std::uint32_t hooks, stream_ref s, gpu_op op) noexcept {
  try {
    auto st = std::make_unique<instrumented_op_state>();
    st->hooks = hooks;
    st->stream = s;
    const bool captured = capturing(s);
    if (!captured) op.flags |= stream_flags_for_trace(s);
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
      unsigned long long id = 0;
      if (captured || driver().cuStreamGetId(s.get(), &id) != CUDA_SUCCESS) id = 0;
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
      st->host = g;
      st->host.lane = trace::this_thread_lane();
      st->host.clock = trace::clock_source::host;
      st->host.stream_id = id;
      if (!captured && acquire_timing_events(s.context(), st->events)) {
        if (driver().cuEventRecord(st->events.begin, s.get()) == CUDA_SUCCESS)
          st->timed = true;
        else
          release_timing_events(s.context(), st->events);
      }
      st->host.begin_ns = trace::now_ns();
    }
    state_ = st.release();
  } catch (...) {
    // Uninstrumented: the operation itself goes ahead.
  }
}

void instrumented_op::issued() noexcept {
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
  if (!state_) return;
  instrumented_op_state& st = *state_;
  if (st.timed) {
    if (driver().cuEventRecord(st.events.end, st.stream.get()) == CUDA_SUCCESS) {
      submit_gpu_span(st.stream.context(), st.stream.get(), st.events, std::move(st.gpu));
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
  if (!state_) return;
  if (state_->timed) release_timing_events(state_->stream.context(), state_->events);
  if (state_->nvtx) nvtxRangePop();
  delete state_;
}

}  // namespace cuasync::detail
