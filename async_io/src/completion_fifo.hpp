// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: completions on their way to their I/O executors. One FIFO per executor keeps their order across passes
// (a pass's completions never overtake an earlier pass's), and a drain handler runs them back to back for at most
// `run_budget` before it re-posts itself, so an io thread's other handlers (a framework's timers) never wait behind a
// burst of completions. A budget of time, not a count: a closed loop over 64 streams completes its whole pass inline
// (64 short handlers), while the waiters of a long kernel (hundreds at once) take turns with everything else.
// Admitted operations (their enqueue, once a place frees up) queue in the same FIFO: a stream freeing hundreds of
// places at once would otherwise post hundreds of handlers, each a driver call, all ahead of the next timer.
#include "wait_op.hpp"

#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/detail/ring_queue.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace cuasync::detail {

// The memory of a lane's posted drain handler: one drain is posted per lane at a time (`drain_posted`), and Asio
// frees a handler's memory before calling it, so one slot serves every post of a closed loop; a bigger or
// overlapping request goes to the heap.
struct drain_memory {
  alignas(std::max_align_t) unsigned char bytes[256];
  std::atomic<bool> in_use{false};
};

class completion_fifo : public std::enable_shared_from_this<completion_fifo> {
  struct lane;

 public:
  //! How long completions run back to back (inline in a pass, or in one drain handler) before others get a turn:
  //! 250 us, or `CUASYNC_DRAIN_BUDGET_US` microseconds (read once; 10 to 100,000). H100, 100,000 coroutines over 64
  //! streams, a 1 ms timer on the io thread: longest gap 3.1-3.6 ms at 1 ms, 2.0-2.4 at 500 us, 1.6-1.9 at 250 us;
  //! the awaited closed loop's rate the same within the run's noise (bench/results/h100-session23).
  static long long run_budget_ns() noexcept;

  //! True when nothing of `ex` is queued: a completion on it may run now without overtaking one.
  bool idle(const boost::asio::any_io_executor& ex) const;
  //! Queues `done[first..]` behind what each one's executor already has; posts a drain handler where none is
  //! pending. Returns the posts made. Never throws (out of memory: a completion is posted on its own).
  std::size_t push(std::vector<completed_wait>& done, std::size_t first) noexcept {
    return push(done, first, nullptr, nullptr);
  }
  //! A lane whose drain the caller runs itself (push with a claim), on the lane's executor, right after the push.
  class claim {
   public:
    explicit operator bool() const noexcept { return l_ != nullptr; }

   private:
    friend class completion_fifo;
    lane* l_ = nullptr;
  };
  //! As push; and when `on` (an executor this thread runs handlers of now) had nothing queued nor a drain posted,
  //! its drain is not posted but left to the caller (`claimed`, run with `drain_claimed`): the io thread's own pass
  //! then runs its completions at once, still behind any that an earlier pass queued.
  std::size_t push(std::vector<completed_wait>& done, std::size_t first, const boost::asio::any_io_executor* on,
                   claim* claimed) noexcept;
  //! Runs a claimed lane's drain here (for at most run_budget_ns(); the rest in a posted drain), storing the time into
  //! `alive` after each completion it runs.
  void drain_claimed(claim c, std::atomic<long long>& alive) { drain(c.l_, &alive); }
  //! Queues an admitted operation (its `ticket`, its place) to be enqueued, behind what its executor has. False when
  //! it could not be queued (out of memory; `ticket` is left to the caller).
  bool push_admitted(wait_op* op, admission_ticket& ticket) noexcept;
  //! Destroys every queued operation without calling it or enqueueing its work (the execution context shuts down).
  void clear() noexcept;

 private:
  // A completion to hand to its handler, or an admitted operation whose work is to be enqueued.
  struct item {
    wait_op* op = nullptr;
    std::error_code error;
    admission_ticket ticket;
    bool admitted = false;
  };
  struct lane {
    boost::asio::any_io_executor ex;
    ring_queue<item> items;  // no allocation once grown (a deque allocates a block every few dozen items)
    bool drain_posted = false;
    drain_memory memory;  // the posted drain's
  };
  struct drain_handler;
  void drain(lane* l, std::atomic<long long>* alive = nullptr);
  void post_drain(lane* l) noexcept;
  static void run(item& it);
  lane& lane_for_locked(const boost::asio::any_io_executor& ex);
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<lane>> lanes_;  // usually one
};

}  // namespace cuasync::detail
