// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `replay_anchor`: a point of a CUDA graph that someone else captures and replays (`torch.cuda.graph`, a JAX command
//! buffer, the caller's own `cuStreamBeginCapture` + `cuGraphLaunch`), made awaitable once per replay. cuasync never
//! sees those launches; the graph itself tells: `mark(s)`, called while `s` is being captured, adds two nodes there,
//! after the work captured so far on `s`:
//!
//! - a one-thread kernel (hand-written PTX, loaded with `cuModuleLoadData`: no NVRTC) that adds 1 to a generation
//!   counter in mapped pinned host memory (volatile load, add, store, `membar.sys`): the counter is the number of
//!   replays that got past the mark. Launches of one `CUgraphExec` never overlap, so it needs no atomics; two execs of
//!   one graph replayed at once on different streams could lose counts (give each its own anchor);
//! - an event record node (`cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL)`), the anchor's fault check: while a wait
//!   is pending its query reports a device error of the replay (a faulted context never bumps the counter).
//!
//! The anchor is a `completion_source`: `target(n)` is a wait for generation n (n replays past the mark since it was
//! made), for any front-end (async_io's `async_wait_replay`, the engine's callbacks). A wait for a generation already
//! reached completes at the first pass; waits are ordered by generation, so one read of the counter completes every
//! waiter it covers (two replays between passes complete both generations' waiters); a pending wait queries the event
//! at most once per `fault_check` period (in relaxed capture mode), and a sticky error there (the context faulted)
//! fails the waits of every generation not reached yet, each on its own (failure_scope::operation: those reached
//! before the fault succeed; `failures_in_order()` is false).
//!
//! The anchor (its counter) must outlive every launch of the graphs it was captured into, as a kernel's argument
//! buffer must: a replay after it is gone writes memory that was freed.

#include <cuasync/driver/event.hpp>
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/completion_queues.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>

namespace cuasync {

namespace detail {
struct replay_anchor_state;
}

//! A generation counter bumped by each replay of a captured region. Cheap to copy (shared state). Thread-safe.
class replay_anchor {
 public:
  struct options {
    //! How often a pending wait queries the event for a device error (the counter is read at every pass).
    std::chrono::nanoseconds fault_check = std::chrono::microseconds(200);
  };

  replay_anchor() = default;

  //! Adds the counter's bump and the fault-check event to the capture under way on `s`, after the work captured on
  //! `s` so far. The counter's memory and the kernel's module are made in relaxed capture mode, so that a global-mode
  //! capture (this thread's or another's) is not invalidated. @throws cuda_error (`CUDA_ERROR_ILLEGAL_STATE` when
  //! `s` is not being captured; the capture is left as it was only for that error)
  static replay_anchor mark(stream_ref s, options opts,
                            std::source_location where = std::source_location::current());
  static replay_anchor mark(stream_ref s, std::source_location where = std::source_location::current()) {
    return mark(s, options{}, where);
  }

  //! Loads the bump kernel's module into `ctx` now (the driver compiles its PTX: milliseconds the first time), so
  //! that a later `mark` inside a capture makes no module load there. Optional. @throws cuda_error
  static void prepare(context_ref ctx, std::source_location where = std::source_location::current());

  explicit operator bool() const noexcept { return state_ != nullptr; }
  //! Replays that have got past the mark so far (a relaxed read of the counter; 0 for an empty anchor).
  std::uint64_t generation() const noexcept;
  //! The generation the next replay to complete reaches: `generation() + 1`.
  std::uint64_t next() const noexcept { return generation() + 1; }
  context_ref context() const noexcept;
  //! The stream it was marked on, as it was described then (for messages).
  const std::string& label() const noexcept;
  //! A wait for generation `n` (reached at once for n <= generation()). @throws cuda_error for an empty anchor
  wait_target target(std::uint64_t n, std::source_location where = std::source_location::current()) const;

 private:
  explicit replay_anchor(std::shared_ptr<detail::replay_anchor_state> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::replay_anchor_state> state_;
};

namespace detail {
//! Enqueues the bump of the counter at device address `word` on `s` (captured when `s` is): the one-thread kernel,
//! its module loaded once per context (replay_bump.cpp). @throws cuda_error
void enqueue_replay_bump(stream_ref s, CUdeviceptr word, std::source_location where);
//! The bump kernel of `ctx`, its module loaded (in relaxed capture mode) the first time. @throws cuda_error
kernel_ref replay_bump_kernel(context_ref ctx, std::source_location where);
}  // namespace detail

}  // namespace cuasync
