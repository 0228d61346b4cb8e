// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The service's operations that enqueue GPU work (async_launch, async_copy) and tasks (staged copies): admission,
// the enqueue or start once admitted, and how a task reports back. The waits themselves are service_queues.cpp's.
#include "service_queues.hpp"

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include <boost/asio/post.hpp>

namespace asio = boost::asio;

namespace cuasync::detail {

void service_queues::queue_for_admission(wait_op* op, bool hold) {
  connect_cancellation(op);
  {
    std::lock_guard lock(mutex_);
    if (shut_down_) {
      op_ptr destroy(op);
      return;
    }
    admitting_.insert(op);
  }
  try {
    cuda_completion_source::instance().wait_admission(op->stream, op, hold);
  } catch (...) {
    leave_admitting(op);
    op_ptr destroy(op);
    throw;
  }
}

bool service_queues::leave_admitting(wait_op* op) {
  std::lock_guard lock(mutex_);
  admitting_.erase(op);
  return !shut_down_;
}

namespace {
// An operation on stream `s`, owned by `owner`.
wait_op* make_stream_op(service_queues* owner, asio::any_io_executor io_ex, stream_ref s,
                        std::shared_ptr<void> keep_alive, wait_handler h, wait_hints hints) {
  wait_op* op = make_op(io_ex, std::move(h), hints);
  op->owner = owner;
  op->stream = s;
  op->keep_alive = std::move(keep_alive);
  return op;
}
// The error code of the exception being handled (inside a catch block).
std::error_code current_code() noexcept {
  try {
    throw;
  } catch (const std::system_error& e) {
    return e.code();
  } catch (const std::bad_alloc&) {
    return std::make_error_code(std::errc::not_enough_memory);
  } catch (...) {
    return std::make_error_code(std::errc::state_not_recoverable);
  }
}
// Runs `store` (which copies the operation's work into it); on failure the operation is destroyed.
template <class F>
void store_or_destroy(wait_op* op, F&& store) {
  try {
    store();
  } catch (...) {
    op_ptr destroy(op);
    throw;
  }
}
}  // namespace

void service_queues::start_operation(asio::any_io_executor io_ex, stream_ref s, const enqueue_ref& enqueue,
                                     std::shared_ptr<void> keep_alive, wait_handler h, wait_hints hints,
                                     std::source_location where) {
  wait_op* op = make_stream_op(this, std::move(io_ex), s, std::move(keep_alive), std::move(h), hints);
  op->where = where;
  admission_ticket ticket;
  if (!try_admit(op, s, false, ticket)) return;
  if (ticket) return run_admitted(op, false, &enqueue, std::move(ticket));
  // No room: the work waits, stored, for an earlier operation of the context to complete.
  store_or_destroy(op, [&] { op->enqueue = enqueue.store(enqueue.work); });
  queue_for_admission(op, false);
}

void service_queues::start_task(asio::any_io_executor io_ex, stream_ref s, const task_ref& task,
                                std::shared_ptr<void> keep_alive, wait_handler h, wait_hints hints) {
  wait_op* op = make_stream_op(this, std::move(io_ex), s, std::move(keep_alive), std::move(h), hints);
  admission_ticket ticket;
  if (!try_admit(op, s, true, ticket)) return;
  if (ticket) return run_task(op, false, &task, std::move(ticket));
  store_or_destroy(op, [&] { op->task = task.store(task.work); });
  queue_for_admission(op, true);
}

namespace {
// The posted enqueue of an admitted operation. Destroyed without running (the context shuts down), it destroys the
// operation without enqueueing anything.
struct admitted_run {
  wait_op* op;
  admission_ticket ticket;
  admitted_run(wait_op* o, admission_ticket t) noexcept : op(o), ticket(std::move(t)) {}
  admitted_run(admitted_run&& o) noexcept : op(std::exchange(o.op, nullptr)), ticket(std::move(o.ticket)) {}
  admitted_run& operator=(admitted_run&&) = delete;
  ~admitted_run() {
    if (op) op->owner->abandon(op);
  }
  void operator()() {
    wait_op* p = std::exchange(op, nullptr);
    if (p->task)
      p->owner->run_task(p, true, nullptr, std::move(ticket));
    else
      p->owner->run_admitted(p, true, nullptr, std::move(ticket));
  }
};
}  // namespace

void wait_op::admitted(admission_ticket ticket) noexcept {
  // Queued behind the executor's completions, so a burst of admissions takes turns with its other handlers.
  if (owner->queue_admitted(this, ticket)) return;
  try {
    asio::any_io_executor io = io_work;
    asio::post(io, admitted_run(this, std::move(ticket)));
  } catch (...) {
    // Out of memory for the post: the operation was abandoned by admitted_run's destructor.
  }
}

bool service_queues::queue_admitted(wait_op* op, admission_ticket& ticket) noexcept {
  return fifo_->push_admitted(op, ticket);
}

bool service_queues::try_admit(wait_op* op, stream_ref s, bool hold, admission_ticket& ticket) noexcept {
  try {
    ticket = cuda_completion_source::instance().try_admit(s, hold, op->where);
    return true;
  } catch (...) {
    // The stream cannot be asked (destroyed, or its context gone): the handler gets the error, naming the call and
    // the caller's line; thrown here it would leave through io_context::run(), past the awaiting coroutine.
    op->failure = std::current_exception();
    fail_started(op, current_code());
    return false;
  }
}

void service_queues::abandon(wait_op* op) noexcept {
  leave_admitting(op);
  op_ptr destroy(op);
}

bool service_queues::still_its_stream(wait_op* op, const admission_ticket& ticket) noexcept {
  const CUstream h = op->stream.get();
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return true;  // a context's own: never destroyed
  constexpr const char* api = "cuasync (an operation admitted after waiting for a place)";
  try {
    std::uint64_t id = 0;
    try {
      id = op->stream.ask_id(op->where);  // the handle's stream now, not the one the reference knew
    } catch (const cuda_error& e) {
      throw cuda_error(e.code(), api,
                       "its stream was destroyed while the operation waited for a place (" + std::string(e.what()) +
                           "): nothing was enqueued",
                       op->where);
    }
    if (id == ticket.stream_key()) return true;
    throw cuda_error(make_error_code(CUDA_ERROR_INVALID_HANDLE), api,
                     "its stream was destroyed while the operation waited for a place, and " + op->stream.describe() +
                         " is now another stream: nothing was enqueued",
                     op->where);
  } catch (...) {
    // Destroyed (its handle refused) or replaced: the work must not go to whatever stream has the handle now.
    op->enqueue = nullptr;
    op->task = nullptr;
    op->failure = std::current_exception();
    fail_started(op, current_code());
    return false;
  }
}

namespace {
// An awaited operation on a stream being captured into a CUDA graph (torch.cuda.graph, the caller's own
// cuStreamBeginCapture): its completion event would be a graph node, never seen done, and querying it would
// invalidate the capture. Refused before anything is enqueued, naming the stream; the capture goes on. One
// cuStreamIsCapturing per awaited operation (bench/results/callgrind-awaited_op.json shows its cost).
void refuse_if_capturing(stream_ref s, const std::source_location& where) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (s.get() == nullptr || s.get() == CU_STREAM_LEGACY) return;  // the legacy stream is never captured
  if (driver().cuStreamIsCapturing(s.get(), &status) != CUDA_SUCCESS || status == CU_STREAM_CAPTURE_STATUS_NONE)
    return;
  throw_cu(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuasync::async_io",
           "awaiting inside a capture: " + s.describe() +
               " is being captured into a CUDA graph, where the operation would be a graph node with no completion "
               "of its own: enqueue it without awaiting (cuasync::launch, copy_async) and await the graph's launch",
           where);
}
}  // namespace

void service_queues::run_admitted(wait_op* op, bool stored, const enqueue_ref* ref, admission_ticket ticket) noexcept {
  if (stored && !leave_admitting(op)) {
    op_ptr destroy(op);  // admitted as the context shuts down: nothing is enqueued
    return;
  }
  if (stored && !still_its_stream(op, ticket)) return;
  const asio::any_io_executor io_ex = op->io_work;
  wait_target t;
  try {
    const long long issued = op->work_key ? completion_queues::now_ns() : 0;  // the work's start, at the latest
    refuse_if_capturing(op->stream, op->where);
    if (stored)
      op->enqueue(op->stream);
    else
      ref->call(ref->work, op->stream);
    t = cuda_completion_source::instance().record_wait(op->stream, std::move(ticket), std::move(op->keep_alive),
                                                       op->where);
    t.work_key = op->work_key;
    t.issue_ns = issued;
  } catch (const std::system_error& e) {
    op->enqueue = nullptr;
    op->failure = std::current_exception();
    return fail_started(op, e.code());
  }
  op->enqueue = nullptr;
  attach(op, std::move(t), io_ex);
}

void task_link::finish(std::error_code ec, std::exception_ptr detail) noexcept {
  keep_alive.reset();
  std::shared_ptr<service_queues> s = std::move(service);
  s->task_finished(this, ec, std::move(detail));
}

void service_queues::task_finished(task_link* link, std::error_code ec, std::exception_ptr detail) noexcept {
  // Under the lock: shutdown takes the operations of running tasks under it too, so this post happens before the
  // I/O context shuts down (its handler is then destroyed with the context's queue), or the operation is gone.
  std::lock_guard lock(mutex_);
  running_tasks_.erase(link);
  if (wait_op* o = link->op.exchange(nullptr)) {
    o->failure = std::move(detail);
    try {
      post_to_io(op_ptr(o), ec);
    } catch (...) {
    }
  }
}

void service_queues::run_task(wait_op* op, bool stored, const task_ref* ref, admission_ticket ticket) noexcept {
  if (stored && !leave_admitting(op)) {
    op_ptr destroy(op);
    return;
  }
  if (stored && !still_its_stream(op, ticket)) return;
  std::shared_ptr<task_link> link;
  try {
    link = std::make_shared<task_link>(op);
    link->keep_alive = std::move(op->keep_alive);
    link->service = shared_from_this();
    {
      std::lock_guard lock(mutex_);
      running_tasks_.insert(link.get());
    }
    op->link = link;
    if (stored)
      op->task(op->stream, std::move(ticket), link);
    else
      ref->start(ref->work, op->stream, std::move(ticket), link);
  } catch (const std::system_error& e) {
    forget_task(link.get());
    op->task = nullptr;
    op->failure = std::current_exception();
    return fail_started(op, e.code());
  } catch (...) {
    forget_task(link.get());
    op->task = nullptr;
    return fail_started(op, std::make_error_code(std::errc::not_enough_memory));
    return;
  }
  op->task = nullptr;
}

void service_queues::fail_started(wait_op* op, std::error_code ec) noexcept {
  queues_.count_failed_start();
  try {
    post_to_io(op_ptr(op), ec);
  } catch (...) {
  }
}

void service_queues::forget_task(task_link* link) noexcept {
  if (!link) return;
  link->op.store(nullptr);
  std::lock_guard lock(mutex_);
  running_tasks_.erase(link);
}

bool service_queues::detach_task(wait_op* op) noexcept {
  wait_op* expected = op;
  return static_cast<task_link&>(*op->link).op.compare_exchange_strong(expected, nullptr);
}

}  // namespace cuasync::detail
