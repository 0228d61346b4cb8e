// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "service_queues.hpp"

#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/detail/pass_scratch.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <cerrno>

namespace asio = boost::asio;

namespace cuasync::detail {
namespace {

std::error_code aborted_code() noexcept { return {ECANCELED, std::system_category()}; }

struct cancel_handler {
  wait_op* op;
  void operator()(asio::cancellation_type_t type) const {
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                 asio::cancellation_type::total)) != asio::cancellation_type::none)
      op->owner->cancel(op);
  }
};


}  // namespace

void service_queues::connect_cancellation(wait_op* op) {
  asio::cancellation_slot slot = asio::get_associated_cancellation_slot(op->handler);
  if (slot.is_connected()) {
    op->slot = slot;
    slot.template emplace<cancel_handler>(cancel_handler{op});
  }
}

void service_queues::start(asio::any_io_executor io_ex, wait_target t, wait_handler h, wait_hints hints) {
  if (!t.source) throw std::invalid_argument("cuasync::completion_service::start_wait: no completion source");
  wait_op* op;
  try {
    op = make_op(io_ex, std::move(h), hints);
  } catch (...) {
    t.source->release(t.token);  // nobody will poll it
    throw;
  }
  op->owner = this;
  attach(op, std::move(t), io_ex);
}

void service_queues::attach(wait_op* op, wait_target t, const asio::any_io_executor& io_ex) noexcept {
  bool added = false;
  try {
    if (!op->slot.is_connected()) connect_cancellation(op);
    added = queues_.add(std::move(t), op);
  } catch (...) {
    // Out of memory: the operation fails (its token was released by the queues).
    queues_.count_failed_start();
    op_ptr o(op);
    try {
      post_to_io(std::move(o), std::make_error_code(std::errc::not_enough_memory));
    } catch (...) {
    }
    return;
  }
  if (!added) {
    op_ptr destroy(op);  // the context is gone: the handler is destroyed without being called
    return;
  }
  bool wake_thread = false;
  {
    std::lock_guard lock(mutex_);
    // The service's own executor holds no outstanding work (each operation holds its own): run() returns once the
    // operations are done.
    if (!poll_executor_) poll_executor_ = asio::prefer(io_ex, asio::execution::outstanding_work.untracked);
    if (policy_.mode == poll_mode::in_executor || executor_window_locked()) {
      if (!task_scheduled_) {
        try {
          schedule_executor_poll_locked(io_ex);
        } catch (...) {
        }
        // The thread learns that it may have to take over if the executor does not poll (executor window).
        wake_thread = policy_.mode == poll_mode::poller_thread;
      } else if (timer_armed_) {
        // The executor sleeps until a predicted end or a fault check: the new wait is looked at now instead.
        timer_armed_ = false;
        ++timer_generation_;
        try {
          timer_->cancel();
          schedule_executor_poll_locked(io_ex);
        } catch (...) {
          task_scheduled_ = false;
          wake_thread = true;
        }
      }
    } else {
      wake_thread = true;
    }
  }
  if (wake_thread) hand_to_thread();
}

void service_queues::hand_to_thread() {
  if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
  poller::instance().submitted();
}

void service_queues::fail(asio::any_io_executor io_ex, std::error_code ec, wait_handler h,
                          std::exception_ptr described, stream_ref s, std::source_location where) {
  wait_op* op = make_op(io_ex, std::move(h), {});
  op->owner = this;
  op->failure = std::move(described);
  op->stream = s;
  op->where = where;
  queues_.count_failed_start();
  post_to_io(op_ptr(op), ec);
}

void service_queues::cancel(wait_op* op) {
  // Still waiting for admission: its work is never enqueued. Waiting for the GPU: the entry stays in its FIFO with
  // the token and keep-alive until the source says the work is done.
  if (cuda_completion_source::instance().cancel_admission(op)) {
    std::lock_guard lock(mutex_);
    admitting_.erase(op);
  } else if (op->link) {
    if (!detach_task(op)) return;  // a running task goes on (its keep-alive with it); the operation completes now
  } else if (!queues_.detach(op)) {
    return;
  }
  op->enqueue = nullptr;
  op->task = nullptr;
  queues_.count_aborted();
  post_to_io(op_ptr(op), aborted_code());
}

namespace {
// A pass's hand-over to the FIFO, made before the next pass can start (completion_queues::deliver_fn): two passes on
// two threads queue their completions in the order they took them, so a later completion never runs first (the
// io thread's pass had run its own at once while the poller thread's earlier ones were still on their way).
struct pass_delivery {
  completion_fifo* fifo;
  const asio::any_io_executor* own;  // the io thread's executor, whose completions it runs itself; null elsewhere
  completion_fifo::claim claimed;
  std::size_t posts = 0;
  static void deliver(void* self, std::vector<completed_wait>& done, std::size_t first) noexcept {
    auto& d = *static_cast<pass_delivery*>(self);
    d.posts = d.fifo->push(done, first, d.own, &d.claimed);
  }
};
}  // namespace

std::size_t service_queues::pass(bool full, bool from_io_thread) {
  detail::pass_scratch scratch;
  std::vector<completed_wait>& done = scratch.get();
  // The io thread's pass runs in executor_poll, posted to poll_executor_, which is set once before that post and
  // never changed: read without the lock.
  pass_delivery d{fifo_.get(), from_io_thread && poll_executor_ ? &*poll_executor_ : nullptr, {}};
  queues_.pass(full, done, &pass_delivery::deliver, &d);
  if (from_io_thread) queues_.count_executor_pass();
  if (d.posts) queues_.count_batches(d.posts);
  // Nothing of this executor was queued before: its completions run now, in order, for a bounded run (the rest
  // behind its other handlers). Each handler run shows the executor alive: the poller thread takes over only when
  // one handler outlasts the executor window.
  if (d.claimed) fifo_->drain_claimed(d.claimed, last_executor_pass_ns_);
  return done.size();
}

std::optional<std::chrono::nanoseconds> service_queues::poller_pass() {
  if (queues_.empty()) return std::nullopt;
  {
    std::lock_guard lock(mutex_);
    if (!shut_down_ && task_scheduled_ && executor_window_locked()) {
      // The executor polls; take over only when it has run no pass for a window (a busy or stopped io thread).
      const auto since = std::chrono::nanoseconds(completion_queues::now_ns() -
                                                  last_executor_pass_ns_.load(std::memory_order_relaxed));
      if (since < policy_.executor_window)
        return std::max<std::chrono::nanoseconds>(policy_.executor_window - since, std::chrono::milliseconds(1));
    }
  }
  pass(queues_.watchdog_due(), false);
  if (queues_.empty()) return std::nullopt;
  // With an executor window the executor reads predicted ends closely; without one this thread does.
  bool window;
  {
    std::lock_guard lock(mutex_);
    window = executor_window_locked();
  }
  return queues_.next_delay(!window);
}

bool service_queues::polled_by_thread() const {
  std::lock_guard lock(mutex_);
  return shut_down_ || policy_.mode == poll_mode::poller_thread;
}

bool service_queues::finished() const {
  std::lock_guard lock(mutex_);
  return shut_down_ && queues_.empty();
}

void service_queues::schedule_executor_poll_locked(const asio::any_io_executor& ex) {
  task_scheduled_ = true;
  last_executor_pass_ns_.store(completion_queues::now_ns(), std::memory_order_relaxed);
  if (!poll_executor_) poll_executor_ = asio::prefer(ex, asio::execution::outstanding_work.untracked);
  asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
}

void service_queues::executor_poll() {
  must_not_block_scope io_thread;  // what the pass releases (a completed copy's keep-alive) frees on the reaper
  last_executor_pass_ns_.store(completion_queues::now_ns(), std::memory_order_relaxed);
  pass(queues_.watchdog_due(), true);
  std::unique_lock lock(mutex_);
  const bool in_executor = policy_.mode == poll_mode::in_executor;
  const bool pending = !queues_.empty();
  std::chrono::nanoseconds delay{0};
  if (!shut_down_ && pending && in_executor) {
    delay = queues_.next_delay(true);
  } else if (!shut_down_ && pending && executor_window_locked()) {
    // Back to back for the window after activity while some wait is unpredicted (short work ends within it). While
    // a wait's predicted end is live the executor keeps the waits itself: on a timer until just before that end
    // (the fault check and the backoff of the others on the way), then back to back (a hand-over from the poller
    // thread would cost its wake-up after the completion; a timer's comes before it, absorbed by the margin).
    // Short unpredicted waits are backed off here too (executor_backoff): no second wake-up after the completion.
    const std::chrono::nanoseconds since = queues_.since_activity();
    if (queues_.has_unpredicted() && since < policy_.executor_window)
      delay = std::chrono::nanoseconds(0);
    else if (since < policy_.executor_backoff || queues_.until_close_read())
      delay = queues_.next_delay(true);
    else
      delay = std::chrono::nanoseconds(-1);  // nothing predicted, a long wait: the poller thread's backoff
  } else {
    delay = std::chrono::nanoseconds(-1);
  }
  if (delay.count() < 0) {
    task_scheduled_ = false;
    const bool hand_over = !shut_down_ && pending;  // window over, or switched to the poller thread
    lock.unlock();
    if (hand_over) {
      if (!in_executor) queues_.count_handoff();
      hand_to_thread();
    }
    return;
  }
  if (delay.count() == 0) {
    // Re-post: other handlers of the executor run between passes, so the io thread is never blocked.
    asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
    return;
  }
  // The poller thread counts the executor alive until its timer's pass is due (and a window after).
  last_executor_pass_ns_.store(completion_queues::now_ns() + delay.count(), std::memory_order_relaxed);
  if (!timer_) timer_.emplace(*poll_executor_);
  timer_->expires_after(delay);
  timer_armed_ = true;
  timer_->async_wait([self = shared_from_this(), generation = timer_generation_](const boost::system::error_code& ec) {
    {
      std::lock_guard lock(self->mutex_);
      if (generation != self->timer_generation_) return;  // cancelled by a new wait, which posted a pass instead
      self->timer_armed_ = false;
      if (ec) {
        self->task_scheduled_ = false;
        return;
      }
    }
    self->executor_poll();
  });
}

void service_queues::shutdown() {
  std::vector<queued_wait*> waits;
  bool pending;
  std::vector<wait_op*> admitting, of_tasks;
  {
    std::lock_guard lock(mutex_);
    shut_down_ = true;
    timer_.reset();
    // Listed under the lock: once off it, an operation admitted meanwhile may be destroyed by its own thread.
    for (wait_op* op = admitting_.take_all(); op; op = op->admitting_next) admitting.push_back(op);
    // Running tasks (staged copies) go on, holding what they use; their operations are taken from them here, under
    // the lock their completions take, so none is posted to the I/O context once it is going.
    for (task_link* link : running_tasks_)
      if (wait_op* op = link->op.exchange(nullptr)) of_tasks.push_back(op);
    running_tasks_.clear();
  }
  for (wait_op* op : of_tasks) op_ptr destroy(op);
  // Operations still waiting for room: never enqueued (one being admitted right now sees shut_down_).
  for (wait_op* op : admitting)
    if (cuda_completion_source::instance().cancel_admission(op)) op_ptr destroy(op);
  waits = queues_.shut_down();
  pending = !queues_.empty();
  // Destroy the handlers without calling them (outside the locks: their destructors may do anything).
  for (queued_wait* w : waits) op_ptr destroy(static_cast<wait_op*>(w));
  fifo_->clear();
  // Tokens still running on the GPU stay polled by the process's poller until done, keeping what they hold alive.
  if (registered_.load())
    poller::instance().remove(this, pending);
  else if (pending && !registered_.exchange(true))
    poller::instance().add(shared_from_this());
}

void service_queues::set_policy(const poll_policy& p) {
  queues_.set_policy(p);
  {
    std::lock_guard lock(mutex_);
    policy_ = p;
    if (shut_down_ || queues_.empty()) return;
    if ((p.mode == poll_mode::in_executor || executor_window_locked()) && !task_scheduled_ && poll_executor_) {
      schedule_executor_poll_locked(*poll_executor_);
      if (p.mode == poll_mode::in_executor) return;
    }
  }
  if (p.mode == poll_mode::poller_thread) hand_to_thread();
}

}  // namespace cuasync::detail
