// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `completion_queues`: the core of the completion engine, with no Asio and no CUDA in it. Waits join one FIFO
//! per queue (a stream); a poll pass asks the FIFOs' sources about their tokens and hands back the waits that are
//! done. Front-ends (async_io's Asio service, the engine's callbacks, the C ABI) attach their operations to it and
//! deliver the completions their own way.
//!
//! The search: a pass queries each FIFO's head and stops at the first pending entry, so its cost grows with active
//! queues, not pending operations. When the source vouches for a queue's completion order (`wait_target::order`), a
//! pass first queries the FIFO's newest entry: done, one query completes the whole FIFO. Pending, the pass gallops
//! back from it (pending queries are cheap: ~0.1 µs for a CUDA event, against ~1.3 µs for a finished one) to the first
//! finished entry and completes everything up to it: one query of finished work per FIFO and pass (the head is
//! checked first while it was pending at the last pass, so a FIFO of long waits costs two queries). A slow "watchdog"
//! pass queries every entry, for tokens that finished out of queue order.
//!
//! Failures: a token that failed fails its wait; a failure scoped to the token's group (a sticky CUDA error fails the
//! context) fails every wait of that group, including waits of the group that read as done in the same pass (a
//! faulted context can make another stream's event read as complete).

#include <cuasync/engine/completion_source.hpp>
#include <cuasync/engine/duration_predictor.hpp>
#include <cuasync/engine/poll_policy.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cuasync {

//! One wait, as the engine sees it: what to query, and what to keep alive until it is done.
struct wait_target {
  completion_source* source = nullptr;  //!< must outlive the engine's use of `token`
  std::uintptr_t queue = 0;  //!< FIFO key: waits of one queue become ready in order (a stream); only heads are polled
  std::uintptr_t group = 0;  //!< failure domain: a group-scoped failure fails all its queues (a context)
  std::uintptr_t token = 0;  //!< what `source` queries; released to it once done
  std::shared_ptr<void> keep_alive;  //!< held until the token is done, even after the wait was cancelled
  //! 0: no promise. Otherwise the token's place in its queue's completion order: the source vouches that once a
  //! token is done, every token of the same queue with a smaller nonzero order is done too (events recorded on one
  //! CUstream, in recording order). FIFOs are kept sorted by it.
  std::uint64_t order = 0;
  //! 0: unknown. Otherwise what the work is (engine/duration_predictor.hpp: a hash of a launch's function, grid,
  //! block and shared memory, a copy's kind and size): waits with the same key are predicted to take as long as the
  //! last ones did.
  std::uint64_t work_key = 0;
  //! When the work was issued (completion_queues::now_ns()); its start is taken as the later of this and the time
  //! the wait before it in the queue was seen done. 0: the time of `add`.
  long long issue_ns = 0;
};

namespace detail {
struct wait_entry;
}

//! The part of a front-end's operation that the engine links to its FIFO entry. Front-ends derive their operation
//! state from it; the engine never owns or frees it.
struct queued_wait {
  detail::wait_entry* entry = nullptr;  // under the queues' mutex: set while waiting, null once taken or detached
};

//! A wait a pass found done (or failed).
struct completed_wait {
  queued_wait* wait;
  std::error_code error;  //!< empty on success
};

//! Counters, for tests and diagnostics.
struct completion_statistics {
  std::uint64_t passes = 0;      //!< poll passes run (head passes and watchdog passes)
  std::uint64_t queries = 0;     //!< source queries made by passes
  std::uint64_t completed = 0;   //!< waits completed successfully
  std::uint64_t failed = 0;      //!< waits completed with a source error (or failed before they could start)
  std::uint64_t aborted = 0;     //!< waits completed with operation_aborted (cancelled)
  std::uint64_t executor_passes = 0;  //!< passes run by a host's own thread (an I/O executor)
  std::uint64_t handoffs = 0;    //!< times a host's thread handed its pending waits to the poller thread
  std::uint64_t batches = 0;     //!< posts carrying completions from a pass off the io executor (one per executor)
  std::uint64_t predicted = 0;   //!< waits that had a predicted duration when added
  std::size_t pending_operations = 0;  //!< waits attached and not handed back yet
  std::size_t pending_tokens = 0;      //!< tokens not yet done (includes those of cancelled waits)
  std::size_t active_queues = 0;       //!< FIFOs with pending tokens
};

//! The FIFOs, the search and the poll clock. Thread-safe; passes are serialised.
class completion_queues {
 public:
  explicit completion_queues(poll_policy policy = poll_policy::from_environment());
  //! Releases the tokens still queued (their waits must have been detached: see `shut_down`).
  ~completion_queues();
  completion_queues(const completion_queues&) = delete;
  completion_queues& operator=(const completion_queues&) = delete;

  //! Attaches `w` to a FIFO entry for `t`. Returns false after `shut_down` (the token is then released and `w` is
  //! not attached). @throws std::bad_alloc, std::invalid_argument (no source)
  bool add(wait_target t, queued_wait* w);
  //! Detaches `w` (a cancellation): true when it was still waiting (the caller completes it now; its token stays
  //! queued until done), false when a pass already handed it back.
  bool detach(queued_wait* w) noexcept;
  //! A pass's hand-over of what it completed (`done[first..]`), called before the next pass can start: passes on
  //! two threads then hand over in the order they took their completions (a front-end queueing them keeps that
  //! order). It must not run handlers (nor anything that may start a pass).
  using deliver_fn = void (*)(void* context, std::vector<completed_wait>& done, std::size_t first) noexcept;
  //! One pass: every FIFO's head search, or every entry when `full`. Appends what completed to `done`, hands it to
  //! `deliver` (when given), releases the done tokens to their sources (outside the lock) and drops their
  //! keep-alives. Serialised with other passes.
  void pass(bool full, std::vector<completed_wait>& done, deliver_fn deliver = nullptr, void* context = nullptr);
  //! A head pass like `pass(false, done)`, only when no other pass is running (it never waits for one): false when
  //! one was, and nothing was done. For a thread that looks for a completion it expects soon (the C ABI's
  //! `queue_poll`) while the poller thread passes too.
  bool try_pass(std::vector<completed_wait>& done);
  //! Refuses new waits from now on and detaches every attached wait (returned, in no particular order). Tokens stay
  //! queued until done: keep polling until `empty()` to release them and their keep-alives.
  std::vector<queued_wait*> shut_down();
  bool is_shut_down() const;
  //! No tokens pending.
  bool empty() const;

  //! Counts a failure of a wait that never started (for the statistics). Never throws.
  void count_failed_start() noexcept;
  void count_aborted() noexcept;
  void count_executor_pass() noexcept;
  void count_handoff() noexcept;
  void count_batches(std::size_t n) noexcept;

  void set_policy(const poll_policy& p);
  poll_policy policy() const;
  //! Activity (a new wait, a completion) restarts the spin window; `at`: when, if the caller read the clock already
  //! (0: now).
  void note_activity(long long at = 0) noexcept {
    last_activity_ns_.store(at ? at : now_ns(), std::memory_order_relaxed);
  }
  std::chrono::nanoseconds since_activity() const noexcept {
    return std::chrono::nanoseconds(now_ns() - last_activity_ns_.load(std::memory_order_relaxed));
  }
  //! The policy's delay before the next pass, at this moment, for a poller that reads predicted ends closely
  //! (`close_reader`) or one that only covers them (poll_policy::next_delay).
  std::chrono::nanoseconds next_delay(bool close_reader = true) const;
  //! The time until close reading of the earliest predicted end should start (0: now), or nullopt when no pending
  //! wait has a live prediction.
  std::optional<std::chrono::nanoseconds> until_close_read() const;
  //! Some pending wait has no live prediction (it gets the backoff, and the executor window).
  bool has_unpredicted() const;
  //! The predicted duration of work `key` of `group` (0: unknown), as `add` would look it up. For tests.
  std::int64_t predicted_ns(std::uint64_t key, std::uintptr_t group) const;
  //! True (and restarts the interval) when a watchdog pass is due.
  bool watchdog_due();
  completion_statistics stats() const;

  static long long now_ns() noexcept {
    return std::chrono::steady_clock::now().time_since_epoch().count();
  }

 private:
  struct fifo;
  struct key_hash {
    std::size_t operator()(const std::pair<completion_source*, std::uintptr_t>& k) const noexcept;
  };
  struct head {
    fifo* f;
    detail::wait_entry* oldest;
    detail::wait_entry* newest;  // null unless the FIFO is ordered and holds more than one entry
  };
  struct pass_state;

  void head_pass(pass_state& ps);
  void full_pass(pass_state& ps);
  void take_locked(detail::wait_entry* e, std::error_code ec, pass_state& ps);
  void finish_locked(fifo& f, detail::wait_entry* e, const poll_result& r, pass_state& ps);
  bool finish_run_locked(fifo& f, std::uint64_t last, const poll_result& r, pass_state& ps);
  void fail_group_locked(std::uintptr_t group, std::error_code ec, pass_state& ps);
  bool search_ordered(fifo& f, std::uint64_t bound, pass_state& ps);
  void settle_pass(pass_state& ps);  // under pass_mutex_: failed groups, statistics, drained FIFOs unlisted
  // pass()'s body, entered holding pass_mutex_ (`pass_lock`), which it releases before the hand-back outside it.
  void run_pass(std::unique_lock<std::mutex>& pass_lock, bool full, std::vector<completed_wait>& done,
                deliver_fn deliver, void* context);
  static void give_tokens_back(const std::vector<detail::wait_entry*>& released,
                               std::vector<std::uintptr_t>& tokens);
  // Prediction hooks (completion_predictions.cpp): a head seen done teaches its duration; after a pass (and an add)
  // the earliest predicted end is recomputed.
  void learn_locked(fifo& f, detail::wait_entry* e, long long now) noexcept;
  void predict_locked(fifo& f, detail::wait_entry* e, bool new_head) noexcept;
  void update_outlook_locked(long long now) noexcept;
  std::optional<poll_policy::predicted_end> earliest_locked(long long now) const noexcept;

  mutable std::mutex mutex_;
  std::mutex pass_mutex_;  // one pass at a time
  std::unordered_map<std::pair<completion_source*, std::uintptr_t>, std::unique_ptr<fifo>, key_hash> queues_;
  std::vector<fifo*> active_;
  std::vector<head> heads_;          // head-pass snapshot (under pass_mutex_)
  std::vector<fifo*> full_scratch_;  // full-pass snapshot (under pass_mutex_)
  poll_policy policy_;
  std::atomic<long long> last_activity_ns_{0};
  long long last_watchdog_ns_ = 0;
  // Predictions (under mutex_): the table, and the outlook of the last pass: the earliest predicted end of a FIFO's
  // head (0: none) with its duration, and whether some head has no live prediction.
  duration_predictor predictor_;
  long long earliest_end_ns_ = 0, earliest_duration_ns_ = 0;
  bool unpredicted_ = false;
  // The latest end of a close-read window that a pending head has outrun (0: none): such a wait is read at a
  // fraction of its overrun (poll_policy::overrun_delay), not left to the backoff.
  long long overrun_from_ns_ = 0;
  completion_statistics stats_;
  bool shut_down_ = false;
};

}  // namespace cuasync
