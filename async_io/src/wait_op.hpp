// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: one asynchronous operation of the Asio front-end, from initiation to the handler's call, and how its
// completion is handed to the handler's executor. Only async_io's sources include this.
#include <cuasync/async_io/completion_service.hpp>
#include <cuasync/engine/admission.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <functional>
#include <source_location>
#include <vector>

namespace cuasync::detail {

class service_queues;

// The operation: its handler and work guards, and, for operations that enqueue GPU work, what to enqueue once
// admitted. Allocated with the handler's associated allocator (or, for handlers without one, from a per-thread cache),
// freed before the handler runs. Linked to its FIFO entry through `queued_wait` while waiting for the GPU, and to its
// stream's admission queue through `admission_waiter` while waiting for room.
struct wait_op final : queued_wait, admission_waiter {
  wait_handler handler;
  boost::asio::any_io_executor io_work;               // outstanding_work.tracked
  boost::asio::any_completion_executor handler_work;  // outstanding_work.tracked; empty: the handler runs on io
  boost::asio::cancellation_slot slot;
  service_queues* owner = nullptr;
  bool cached = false;            // memory from the per-thread cache
  // Operations that enqueue work (async_launch, async_copy): what to enqueue, stored while the operation waits for
  // admission; tasks (staged copies): what to start, and the link through which the task reports.
  stream_ref stream;
  std::function<void(stream_ref)> enqueue;
  std::function<task_ref::start_fn> task;
  std::shared_ptr<task_done> link;
  std::shared_ptr<void> keep_alive;
  std::source_location where;
  std::uint64_t work_key = 0;  // wait_hints::work_key: what the work is, for the engine's prediction
  std::exception_ptr failure;  // a failed start's full description (the cuda_error naming the call), for the handler
  // Tracing (trace/): when the operation began and on which thread's lane; 0 when recording was off at initiation.
  std::int64_t traced_since = 0;
  std::uint64_t traced_thread = 0;
  // Its links in the service's list of operations waiting for admission (admitting_list), under its mutex.
  wait_op* admitting_prev = nullptr;
  wait_op* admitting_next = nullptr;
  bool admitting = false;

  wait_op(wait_handler h, boost::asio::any_io_executor io, boost::asio::any_completion_executor hw, bool c)
      : handler(std::move(h)), io_work(std::move(io)), handler_work(std::move(hw)), cached(c) {}
  // Admitted (on the thread that made room): the work is enqueued by a handler posted to the I/O executor, so that
  // a burst of admissions interleaves with the executor's other handlers.
  void admitted(admission_ticket ticket) noexcept override;
};

//! The operations waiting for admission, linked through themselves: inserting and erasing take constant time and
//! allocate nothing (a hash set of them, at 100,000 coroutines waiting, held the io thread 2-3 ms per rehash on the
//! H100). Not thread-safe: its owner's lock guards it.
class admitting_list {
 public:
  void insert(wait_op* op) noexcept {
    op->admitting_prev = nullptr;
    op->admitting_next = head_;
    if (head_) head_->admitting_prev = op;
    head_ = op;
    op->admitting = true;
  }
  //! Takes `op` off the list; nothing when it is not on it.
  void erase(wait_op* op) noexcept {
    if (!op->admitting) return;
    (op->admitting_prev ? op->admitting_prev->admitting_next : head_) = op->admitting_next;
    if (op->admitting_next) op->admitting_next->admitting_prev = op->admitting_prev;
    op->admitting_prev = op->admitting_next = nullptr;
    op->admitting = false;
  }
  //! Empties the list; answers its first operation, the rest linked by `admitting_next` (each one off the list:
  //! walk them before the lock is let go).
  wait_op* take_all() noexcept {
    wait_op* first = head_;
    for (wait_op* op = head_; op; op = op->admitting_next) op->admitting = false;
    head_ = nullptr;
    return first;
  }

 private:
  wait_op* head_ = nullptr;
};

//! Allocates an operation for `h` (on `io_ex`); throws what the allocation or the executors throw.
wait_op* make_op(const boost::asio::any_io_executor& io_ex, wait_handler h, wait_hints hints);

// Owns an operation in flight between executors: destroyed without being invoked (shutdown), it frees the operation
// and destroys the handler without calling it.
class op_ptr {
 public:
  explicit op_ptr(wait_op* p) noexcept : p_(p) {}
  op_ptr(op_ptr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  op_ptr& operator=(op_ptr&&) = delete;
  ~op_ptr();
  wait_op* get() const noexcept { return p_; }
  wait_op* release() noexcept { return std::exchange(p_, nullptr); }

 private:
  wait_op* p_;
};

// On the I/O executor: to the handler's executor (nothing more to do when that is the I/O executor).
void dispatch_to_handler(op_ptr o, std::error_code ec);
// From a thread that is not the I/O executor's (the poller, a cancelling thread, an initiating function): post to
// the I/O executor, which dispatches to the handler's executor. Never inline.
void post_to_io(op_ptr o, std::error_code ec);


}  // namespace cuasync::detail
