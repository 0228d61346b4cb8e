#include "service_queues.hpp"

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
    // operations are done. An operation's io_work is tracked: compare untracked forms.
    const asio::any_io_executor key = asio::prefer(io_ex, asio::execution::outstanding_work.untracked);
    if (!poll_executor_) poll_executor_ = key;
    op->on_poll_executor = key == *poll_executor_;
    if (policy_.mode == poll_mode::in_executor || executor_window_locked()) {
      if (!task_scheduled_) {
        try {
          schedule_executor_poll_locked(io_ex);
        } catch (...) {
        }
        // The thread learns that it may have to take over if the executor does not poll (executor window).
        wake_thread = policy_.mode == poll_mode::poller_thread;
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

std::size_t service_queues::pass(bool full, bool from_io_thread) {
  detail::pass_scratch scratch;
  std::vector<completed_wait>& done = scratch.get();
  queues_.pass(full, done);
  if (from_io_thread) queues_.count_executor_pass();
  const std::size_t n = done.size();
  if (from_io_thread) {
    // Each handler run shows the executor alive: the poller thread takes over only when one handler outlasts the
    // executor window (a busy io thread launching the next batch is not a stopped one; polling from another thread
    // then contends with its launches inside the driver).
    // Inline only while nothing of this executor waits in the FIFO (a completion never overtakes an earlier one),
    // and for a bounded run; the rest queue behind the executor's other handlers.
    std::size_t i = 0;
    std::optional<asio::any_io_executor> poll_ex;
    if (n) {
      std::lock_guard lock(mutex_);
      poll_ex = poll_executor_;
    }
    if (poll_ex && fifo_->idle(*poll_ex)) {
      const long long end = completion_queues::now_ns() + completion_fifo::run_budget_ns;
      for (long long now = 0; i < n && now < end; ++i) {
        complete_on_poll_executor(op_ptr(static_cast<wait_op*>(done[i].wait)), done[i].error);
        now = completion_queues::now_ns();
        last_executor_pass_ns_.store(now, std::memory_order_relaxed);
      }
    }
    if (i < n) queues_.count_batches(fifo_->push(done, i));
  } else if (n) {
    queues_.count_batches(fifo_->push(done, 0));
  }
  return n;
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
  return queues_.next_delay();
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
  last_executor_pass_ns_.store(completion_queues::now_ns(), std::memory_order_relaxed);
  pass(queues_.watchdog_due(), true);
  std::unique_lock lock(mutex_);
  const bool in_executor = policy_.mode == poll_mode::in_executor;
  const bool pending = !queues_.empty();
  if (shut_down_ || !pending || !in_executor) {
    // Within the executor window the executor keeps polling back to back, as in in_executor mode.
    if (!shut_down_ && pending && executor_window_locked() && queues_.since_activity() < policy_.executor_window) {
      asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
      return;
    }
    task_scheduled_ = false;
    const bool hand_over = !shut_down_ && pending;  // window over, or switched to the poller thread
    lock.unlock();
    if (hand_over) {
      if (!in_executor) queues_.count_handoff();
      hand_to_thread();
    }
    return;
  }
  const std::chrono::nanoseconds delay = queues_.next_delay();
  if (delay.count() == 0) {
    // Re-post: other handlers of the executor run between passes, so the io thread is never blocked.
    asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
    return;
  }
  if (!timer_) timer_.emplace(*poll_executor_);
  timer_->expires_after(delay);
  timer_->async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) {
      self->executor_poll();
    } else {
      std::lock_guard lock(self->mutex_);
      self->task_scheduled_ = false;
    }
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
    admitting.assign(admitting_.begin(), admitting_.end());
    admitting_.clear();
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
