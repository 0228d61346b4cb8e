// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the state behind one completion_service. It attaches Asio operations to the engine's FIFOs
// (completion_queues), decides who polls (the io executor during its window, or the poller thread), and hands
// completions to the operations' executors. Only async_io's sources include this.
#include "completion_fifo.hpp"
#include "wait_op.hpp"

#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/poller.hpp>

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_set>

namespace cuasync::detail {

class service_queues;

// Between a running task (a staged copy) and its operation: the task reports through it; a cancellation detaches the
// operation, and so does the service's shutdown (the I/O context is going: nothing may be posted to it afterwards).
struct task_link final : task_done {
  std::atomic<wait_op*> op;
  std::shared_ptr<void> keep_alive;  // held until the task is done, even when the operation was cancelled
  std::shared_ptr<service_queues> service;
  explicit task_link(wait_op* o) : op(o) {}
  void finish(std::error_code ec, std::exception_ptr detail) noexcept override;
};

class service_queues final : public poll_client, public std::enable_shared_from_this<service_queues> {
 public:
  service_queues() = default;

  // A wait on a token already recorded.
  void start(boost::asio::any_io_executor io_ex, wait_target t, wait_handler h, wait_hints hints);
  // An operation that enqueues work on `s` once admitted, then waits for it (see completion_service::start_operation).
  void start_operation(boost::asio::any_io_executor io_ex, stream_ref s, const enqueue_ref& enqueue,
                       std::shared_ptr<void> keep_alive, wait_handler h, wait_hints hints, std::source_location where);
  void start_task(boost::asio::any_io_executor io_ex, stream_ref s, const task_ref& task,
                  std::shared_ptr<void> keep_alive, wait_handler h, wait_hints hints);
  void fail(boost::asio::any_io_executor io_ex, std::error_code ec, wait_handler h, std::exception_ptr described,
            stream_ref s, std::source_location where);
  void cancel(wait_op* op);
  void shutdown();

  // The admitted operation's work: enqueue, record, attach (or fail). Never throws. `stored`: it waited for
  // admission (its work is in op->enqueue); otherwise `ref` is the caller's.
  void run_admitted(wait_op* op, bool stored, const enqueue_ref* ref, admission_ticket ticket) noexcept;
  // An operation admitted after waiting: its run_admitted (or run_task) queued in the completion FIFO. False when it
  // could not be queued (out of memory: `ticket` is still the caller's).
  bool queue_admitted(wait_op* op, admission_ticket& ticket) noexcept;
  // An admitted operation whose enqueue will never run (its post was dropped): destroyed without a call.
  void abandon(wait_op* op) noexcept;
  //! A place for `op` on `s` now (`ticket` set) or later (`ticket` empty): true. False when the stream cannot be
  //! asked: then `op` has failed with that error (posted to its handler, never thrown).
  bool try_admit(wait_op* op, stream_ref s, bool hold, admission_ticket& ticket) noexcept;
  //! An operation admitted after waiting: true when its stream is still the one it was started on (same id); else
  //! `op` has failed (its stream was destroyed meanwhile, its handle maybe another stream's now).
  bool still_its_stream(wait_op* op, const admission_ticket& ticket) noexcept;
  // Completes an operation whose work could not be enqueued or started with `ec`. Never throws.
  void fail_started(wait_op* op, std::error_code ec) noexcept;
  // Detaches `op` from its running task: true when the task had not completed it yet.
  static bool detach_task(wait_op* op) noexcept;
  // The admitted task: start it (or fail). Never throws.
  void run_task(wait_op* op, bool stored, const task_ref* ref, admission_ticket ticket) noexcept;
  // A running task is done: completes its operation unless a cancellation or shutdown took it. Never throws.
  void task_finished(task_link* link, std::error_code ec, std::exception_ptr detail) noexcept;

  void set_policy(const poll_policy& p);
  poll_policy policy() const { return queues_.policy(); }
  completion_statistics stats() const { return queues_.stats(); }

  // One pass (head search, or every entry when `full`), handing completions over: by post to the I/O executor
  // (`from_io_thread` false) or by dispatch to the handler's executor (on the poll executor). Returns the count.
  std::size_t pass(bool full, bool from_io_thread);

  std::optional<std::chrono::nanoseconds> poller_pass() override;
  bool polled_by_thread() const override;
  bool finished() const override;

 private:
  // Attaches `op` to its FIFO and makes sure someone polls. Never throws (a failure fails the operation).
  void attach(wait_op* op, wait_target t, const boost::asio::any_io_executor& io_ex) noexcept;
  void connect_cancellation(wait_op* op);
  // Queues `op` for admission on its stream (its work stored in it). @throws std::bad_alloc, cuda_error
  void queue_for_admission(wait_op* op, bool hold);
  // Takes `op` off admitting_; false when shutdown took it (the caller then destroys it). For ops that waited.
  bool leave_admitting(wait_op* op);
  // A task that did not start: its link leaves running_tasks_.
  void forget_task(task_link* link) noexcept;
  void executor_poll();
  void hand_to_thread();
  void schedule_executor_poll_locked(const boost::asio::any_io_executor& ex);
  bool executor_window_locked() const {
    return policy_.mode == poll_mode::poller_thread && policy_.executor_window.count() > 0;
  }

  completion_queues queues_;
  // The polling decisions, under mutex_ (taken before the queues' own lock, never after).
  mutable std::mutex mutex_;
  poll_policy policy_ = poll_policy::from_environment();  // a copy of the queues' policy, for the decisions
  bool shut_down_ = false;
  bool task_scheduled_ = false;                     // an executor poll task is posted or running
  std::atomic<long long> last_executor_pass_ns_{0};  // a task that runs no pass for a window is starving
  std::optional<boost::asio::any_io_executor> poll_executor_;
  std::optional<boost::asio::steady_timer> timer_;
  bool timer_armed_ = false;           // the executor's next pass waits on timer_
  std::uint64_t timer_generation_ = 0;  // a cancelled timer's handler (a new wait came) does nothing
  std::atomic<bool> registered_{false};
  admitting_list admitting_;  // operations waiting for admission (destroyed at shutdown)
  std::unordered_set<task_link*> running_tasks_;  // links of started tasks until they finish (detached at shutdown)
  std::shared_ptr<completion_fifo> fifo_ = std::make_shared<completion_fifo>();  // completions on their way
};

}  // namespace cuasync::detail
