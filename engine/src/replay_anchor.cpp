// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The replay anchor (replay_anchor.hpp): its counter, its fault-check event and the completion source that answers
// waits for generations. The bump kernel is in replay_bump.cpp.
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/replay_anchor.hpp>

#include <atomic>
#include <cstring>

namespace cuasync {
namespace detail {

// A token is the generation + 1 (a generation may be 0, a token never is); the order is the token, so one FIFO per
// anchor stays sorted by generation and a read that covers the newest waiter completes them all.
struct replay_anchor_state final : completion_source {
  context_ref ctx;
  pinned_buffer word;  // the counter, written by the device
  event fault_event;   // recorded by each replay after the bump
  std::string label;
  std::uintptr_t queue = 0;  // unique per anchor: FIFO keys are never reused by a later anchor at the same address
  long long fault_check_ns = 0;
  std::atomic<long long> last_check_ns{0};
  std::atomic<CUresult> fault{CUDA_SUCCESS};

  std::uint64_t count() const noexcept {
    return std::atomic_ref<std::uint64_t>(*word.data<std::uint64_t>()).load(std::memory_order_acquire);
  }

  poll_result query(std::uintptr_t token) noexcept override {
    if (count() + 1 >= token) return {poll_status::ready, {}, {}};
    // A fault seen once stays (a faulted context stays so): every generation not reached fails with it.
    if (const CUresult f = fault.load(std::memory_order_acquire); f != CUDA_SUCCESS) return failed(f);
    // Not reached: at most once a period, ask the event whether the context faulted (the counter of a faulted replay
    // never moves). One exchange per period across passes and threads.
    const long long now = completion_queues::now_ns();
    long long last = last_check_ns.load(std::memory_order_relaxed);
    if (now - last < fault_check_ns || !last_check_ns.compare_exchange_strong(last, now, std::memory_order_relaxed))
      return {poll_status::pending, {}, {}};
    const CUresult r = query_event();
    // Only a fault of the context counts: NOT_READY (a replay under way), SUCCESS (none, or the last one ended) and
    // whatever a driver answers for an event whose record node is in a capture not ended yet are not a replay's
    // fault. A faulted context answers every call with its sticky error, so the fault is seen whatever the event's
    // state.
    if (!cuda_completion_source::is_sticky(r)) {
      if (count() + 1 >= token) return {poll_status::ready, {}, {}};  // reached meanwhile
      return {poll_status::pending, {}, {}};
    }
    fault.store(r, std::memory_order_release);
    if (count() + 1 >= token) return {poll_status::ready, {}, {}};  // reached before the fault
    return failed(r);
  }
  // In relaxed capture mode: the query is a "potentially unsafe" call, which would invalidate a global-mode capture
  // under way on another thread (torch.cuda.graph) when this thread (an io thread's pass) is in global mode.
  CUresult query_event() const noexcept {
    const auto& d = driver();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    const bool swapped = d.cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    const CUresult r = d.cuEventQuery(fault_event.get());
    if (swapped) d.cuThreadExchangeStreamCaptureMode(&mode);
    return r;
  }
  // Each generation on its own: those reached before the fault completed (the engine then asks each from the head,
  // failures_in_order), and a group failure would also fail those completed in the same pass. Other waits of the
  // context learn of a sticky error from their own sources.
  static poll_result failed(CUresult r) noexcept {
    return {poll_status::failed, make_error_code(r), failure_scope::operation};
  }
  bool failures_in_order() const noexcept override { return false; }
  void release(std::uintptr_t) noexcept override {}
};

namespace {
std::atomic<std::uintptr_t> next_queue{1};
}  // namespace

}  // namespace detail

replay_anchor replay_anchor::mark(stream_ref s, options opts, std::source_location where) {
  if (!s) detail::throw_invalid("cuasync::replay_anchor::mark", "empty stream", where);
  const auto& d = detail::driver(where);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  detail::check(d.cuStreamIsCapturing(s.get(), &status), "cuStreamIsCapturing", where);
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    detail::throw_cu(CUDA_ERROR_ILLEGAL_STATE, "cuasync::replay_anchor::mark",
                     s.describe() + (status == CU_STREAM_CAPTURE_STATUS_NONE
                                         ? " is not being captured: an anchor marks a point of a capture"
                                         : "'s capture was invalidated"),
                     where);
  auto st = std::make_shared<detail::replay_anchor_state>();
  st->ctx = s.context();
  st->label = s.describe();
  st->queue = detail::next_queue.fetch_add(1, std::memory_order_relaxed);
  st->fault_check_ns = opts.fault_check.count();
  scoped_context current(st->ctx, where);  // the caller's thread may have none current (a C ABI caller)
  {
    // Relaxed: cuMemHostAlloc is a call a global-mode capture forbids; the counter is no part of the graph.
    thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED, where);
    st->word = pinned_buffer::allocate(st->ctx, sizeof(std::uint64_t), where);
    std::memset(st->word.get(), 0, sizeof(std::uint64_t));
    st->fault_event = event::create(st->ctx, {}, where);  // timing disabled
  }
  detail::enqueue_replay_bump(s, st->word.device_pointer(where), where);
  if (CUresult r = d.cuEventRecordWithFlags(st->fault_event.get(), s.get(), CU_EVENT_RECORD_EXTERNAL);
      r != CUDA_SUCCESS) {
    // The bump is a node of the capture already: a graph made of it would write the counter, so it stays (for the
    // process) instead of being freed under it.
    static_cast<void>(new std::shared_ptr<detail::replay_anchor_state>(st));
    detail::throw_cu(r, "cuEventRecordWithFlags", s.describe(), where);
  }
  return replay_anchor(std::move(st));
}

void replay_anchor::prepare(context_ref ctx, std::source_location where) {
  scoped_context current(ctx, where);
  detail::replay_bump_kernel(ctx, where);
}

std::uint64_t replay_anchor::generation() const noexcept { return state_ ? state_->count() : 0; }

context_ref replay_anchor::context() const noexcept { return state_ ? state_->ctx : context_ref{}; }

const std::string& replay_anchor::label() const noexcept {
  static const std::string none = "an empty replay_anchor";
  return state_ ? state_->label : none;
}

wait_target replay_anchor::target(std::uint64_t n, std::source_location where) const {
  if (!state_) detail::throw_invalid("cuasync::replay_anchor::target", "the anchor is empty", where);
  const std::uintptr_t token = static_cast<std::uintptr_t>(n) + 1;
  return {.source = state_.get(),
          .queue = state_->queue,
          .group = reinterpret_cast<std::uintptr_t>(state_->ctx.get()),
          .token = token,
          .keep_alive = state_,
          .order = token};
}

}  // namespace cuasync
