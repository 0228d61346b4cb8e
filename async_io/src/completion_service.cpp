// The completion service: per-queue FIFOs polled head-first, hand-over to Asio executors, cancellation, shutdown;
// and the process's poller thread. All of Asio's heavy templates for async_io are instantiated here.
#include <cuasync/async_io/completion_service.hpp>

#include "wait_queues.hpp"

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <sys/prctl.h>

#include <algorithm>
#include <cstdlib>

namespace asio = boost::asio;

namespace cuasync {
namespace detail {
namespace {

std::error_code aborted_code() noexcept { return {ECANCELED, std::system_category()}; }

using op_allocator = std::allocator_traits<asio::associated_allocator_t<wait_handler>>::rebind_alloc<wait_op>;

// Destroys `op` and frees its memory with the handler's allocator, leaving the handler in `out`.
wait_handler free_op(wait_op* op) noexcept {
  wait_handler h = std::move(op->handler);
  op_allocator alloc(asio::get_associated_allocator(h));
  op->~wait_op();
  std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
  return h;
}

// Owns an op in flight between executors: destroyed without being invoked (shutdown), it frees the op and destroys
// the handler without calling it.
class op_ptr {
 public:
  explicit op_ptr(wait_op* p) noexcept : p_(p) {}
  op_ptr(op_ptr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  op_ptr& operator=(op_ptr&&) = delete;
  ~op_ptr() {
    if (p_) {
      if (p_->slot.is_connected()) p_->slot.clear();
      free_op(p_);
    }
  }
  wait_op* get() const noexcept { return p_; }
  wait_op* release() noexcept { return std::exchange(p_, nullptr); }

 private:
  wait_op* p_;
};

// Runs on the handler's associated executor: free the state, then call the handler.
void invoke(op_ptr o, std::error_code ec) {
  wait_op* op = o.release();
  if (op->slot.is_connected()) op->slot.clear();
  wait_handler h = free_op(op);
  std::move(h)(ec);
}

void dispatch_to_handler(op_ptr o, std::error_code ec) {
  asio::any_completion_executor ex = o.get()->handler_work;
  asio::dispatch(ex, [o = std::move(o), ec]() mutable { invoke(std::move(o), ec); });
}

// From a thread that is not the I/O executor's (the poller, a cancelling thread, the initiating function): post to
// the I/O executor, which dispatches to the handler's executor. Never inline.
void post_to_io(op_ptr o, std::error_code ec) {
  asio::any_io_executor io = o.get()->io_work;
  asio::post(io, [o = std::move(o), ec]() mutable { dispatch_to_handler(std::move(o), ec); });
}

struct cancel_handler {
  wait_op* op;
  void operator()(asio::cancellation_type_t type) const {
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial |
                 asio::cancellation_type::total)) != asio::cancellation_type::none)
      op->owner->cancel(op);
  }
};

poll_policy initial_policy() {
  if (const char* name = std::getenv("CUASYNC_POLL_POLICY")) return poll_policy::from_name(name);
  return poll_policy::balanced();
}

}  // namespace

// ---- wait_queues ----------------------------------------------------------------------------------------------

wait_queues::wait_queues() : policy_(initial_policy()) { note_activity(); }

wait_queues::~wait_queues() {
  for (auto& [key, f] : queues_)
    for (wait_entry* e : f.entries) {
      e->source->release(e->token);
      delete e;
    }
}

wait_op* wait_queues::make_op(asio::any_io_executor io_ex, wait_handler h) {
  op_allocator alloc(asio::get_associated_allocator(h));
  wait_op* op = std::allocator_traits<op_allocator>::allocate(alloc, 1);
  try {
    asio::any_completion_executor handler_ex = asio::get_associated_executor(h, io_ex);
    asio::any_io_executor io_work = asio::prefer(io_ex, asio::execution::outstanding_work.tracked);
    asio::any_completion_executor handler_work = asio::prefer(handler_ex, asio::execution::outstanding_work.tracked);
    new (op) wait_op{std::move(h), std::move(io_work), std::move(handler_work), {}, nullptr, nullptr};
  } catch (...) {
    std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
    throw;
  }
  return op;
}

void wait_queues::start(asio::any_io_executor io_ex, wait_target t, wait_handler h) {
  if (!t.source) throw std::invalid_argument("cuasync::completion_service::start_wait: no completion source");
  wait_op* op = make_op(io_ex, std::move(h));
  auto* e = new wait_entry{t.source, t.token, t.group, std::move(t.keep_alive), op};
  bool thread_mode;
  {
    std::unique_lock lock(mutex_);
    if (shut_down_) {
      lock.unlock();
      e->source->release(e->token);
      delete e;
      op_ptr destroy(op);  // the context is gone: the handler is destroyed without being called
      return;
    }
    fifo& f = queues_[{t.source, t.queue}];
    if (!f.source) {
      f.source = t.source;
      f.key = t.queue;
      f.group = t.group;
    }
    if (!f.listed) {
      active_.push_back(&f);
      f.listed = true;
    }
    f.entries.push_back(e);
    op->entry = e;
    op->owner = this;
    ++stats_.pending_operations;
    ++stats_.pending_tokens;
    asio::cancellation_slot slot = asio::get_associated_cancellation_slot(op->handler);
    if (slot.is_connected()) {
      op->slot = slot;
      slot.template emplace<cancel_handler>(cancel_handler{op});
    }
    note_activity();
    thread_mode = policy_.mode == poll_mode::poller_thread;
    if (!thread_mode && !task_scheduled_) schedule_executor_poll_locked(io_ex);
  }
  if (thread_mode) {
    if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
    poller::instance().submitted();
  }
}

void wait_queues::fail(asio::any_io_executor io_ex, std::error_code ec, wait_handler h) {
  wait_op* op = make_op(std::move(io_ex), std::move(h));
  op->owner = this;
  {
    std::lock_guard lock(mutex_);
    ++stats_.failed;
  }
  post_to_io(op_ptr(op), ec);
}

void wait_queues::cancel(wait_op* op) {
  {
    std::lock_guard lock(mutex_);
    if (!op->entry) return;  // already handed over: completion wins, exactly once
    op->entry->op = nullptr;
    op->entry = nullptr;
    --stats_.pending_operations;
    ++stats_.aborted;
  }
  // The entry stays in its FIFO with the token and keep-alive until the source says the work is done.
  post_to_io(op_ptr(op), aborted_code());
}

void wait_queues::take_locked(wait_entry* e, std::error_code ec, std::vector<finished>& done) {
  --stats_.pending_tokens;
  if (wait_op* op = std::exchange(e->op, nullptr)) {
    op->entry = nullptr;
    --stats_.pending_operations;
    ++(ec ? stats_.failed : stats_.completed);
    done.push_back({op, ec});
  }
}

void wait_queues::fail_group_locked(std::uintptr_t group, std::error_code ec, std::vector<finished>& done,
                                    std::vector<wait_entry*>& released) {
  for (fifo* f : active_) {
    if (f->group != group) continue;
    for (wait_entry* e : f->entries) {
      take_locked(e, ec, done);
      released.push_back(e);
    }
    f->entries.clear();
  }
}

std::size_t wait_queues::pass(bool full, bool from_io_thread) {
  std::vector<finished> done;
  std::vector<wait_entry*> released;
  {
    std::lock_guard pass_lock(pass_mutex_);
    {
      std::lock_guard lock(mutex_);
      scratch_.assign(active_.begin(), active_.end());
      ++stats_.passes;
    }
    std::uint64_t queries = 0;
    for (fifo* f : scratch_) {
      std::size_t i = 0;
      for (;;) {
        wait_entry* e;
        {
          std::lock_guard lock(mutex_);
          if (i >= f->entries.size()) break;
          e = f->entries[i];
        }
        // Entries are only removed by passes (serialised by pass_mutex_), so `e` stays valid without the lock.
        const poll_result r = e->source->query(e->token);
        ++queries;
        if (r.status == poll_status::pending) {
          if (!full) break;  // head-only: later entries of this queue cannot be done before the head
          ++i;
          continue;
        }
        std::lock_guard lock(mutex_);
        f->entries.erase(f->entries.begin() + static_cast<std::ptrdiff_t>(i));
        take_locked(e, r.status == poll_status::failed ? r.error : std::error_code(), done);
        released.push_back(e);
        if (r.status == poll_status::failed && r.scope == failure_scope::group)
          fail_group_locked(e->group, r.error, done, released);
      }
    }
    std::lock_guard lock(mutex_);
    stats_.queries += queries;
    std::erase_if(active_, [&](fifo* f) {
      if (!f->entries.empty()) return false;
      f->listed = false;
      queues_.erase({f->source, f->key});
      return true;
    });
    if (!done.empty()) note_activity();
  }
  // Outside the locks: give tokens back, drop keep-alives (user destructors), hand completions over.
  for (wait_entry* e : released) {
    e->source->release(e->token);
    delete e;
  }
  for (finished& d : done) {
    if (from_io_thread)
      dispatch_to_handler(op_ptr(d.op), d.error);
    else
      post_to_io(op_ptr(d.op), d.error);
  }
  return done.size();
}

std::optional<std::chrono::nanoseconds> wait_queues::poller_pass() {
  {
    std::lock_guard lock(mutex_);
    if (active_.empty()) return std::nullopt;
  }
  pass(watchdog_due(), false);
  std::lock_guard lock(mutex_);
  if (active_.empty()) return std::nullopt;
  return next_delay_locked();
}

bool wait_queues::watchdog_due() {
  std::lock_guard lock(mutex_);
  const auto now = steady::now();
  if (now - last_watchdog_ < policy_.watchdog) return false;
  last_watchdog_ = now;
  return true;
}

std::chrono::nanoseconds wait_queues::next_delay_locked() const {
  const auto since = std::chrono::nanoseconds(steady::now().time_since_epoch().count() -
                                              last_activity_ns_.load(std::memory_order_relaxed));
  return policy_.next_delay(since);
}

void wait_queues::schedule_executor_poll_locked(const asio::any_io_executor& ex) {
  task_scheduled_ = true;
  if (!poll_executor_) poll_executor_ = ex;
  asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
}

void wait_queues::executor_poll() {
  pass(watchdog_due(), true);
  std::unique_lock lock(mutex_);
  if (shut_down_ || active_.empty() || policy_.mode != poll_mode::in_executor) {
    task_scheduled_ = false;
    const bool hand_to_thread = !shut_down_ && !active_.empty();  // switched to the poller thread
    lock.unlock();
    if (hand_to_thread) {
      if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
      poller::instance().submitted();
    }
    return;
  }
  const std::chrono::nanoseconds delay = next_delay_locked();
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

void wait_queues::shutdown() {
  std::vector<wait_op*> ops;
  bool orphans;
  {
    std::lock_guard pass_lock(pass_mutex_);  // waits for a pass in progress on the poller thread
    std::lock_guard lock(mutex_);
    shut_down_ = true;
    for (fifo* f : active_)
      for (wait_entry* e : f->entries)
        if (wait_op* op = std::exchange(e->op, nullptr)) {
          op->entry = nullptr;
          ops.push_back(op);
        }
    stats_.pending_operations = 0;
    timer_.reset();
    orphans = !active_.empty();
  }
  // Destroy the handlers without calling them (outside the locks: their destructors may do anything).
  for (wait_op* op : ops) op_ptr destroy(op);
  // Tokens still running on the GPU stay polled by the process's poller until done, keeping what they hold alive.
  if (registered_.load()) {
    poller::instance().remove(this, orphans);
  } else if (orphans) {
    poller::instance().adopt_orphan(shared_from_this());
  }
}

bool wait_queues::polled_by_thread() const {
  std::lock_guard lock(mutex_);
  return shut_down_ || policy_.mode == poll_mode::poller_thread;
}

bool wait_queues::drained_orphan() const {
  std::lock_guard lock(mutex_);
  return shut_down_ && active_.empty();
}

bool wait_queues::empty() const {
  std::lock_guard lock(mutex_);
  return active_.empty();
}

void wait_queues::set_policy(const poll_policy& p) {
  std::optional<asio::any_io_executor> ex;
  {
    std::lock_guard lock(mutex_);
    policy_ = p;
    note_activity();
    if (shut_down_ || active_.empty()) return;
    if (p.mode == poll_mode::in_executor && !task_scheduled_) {
      // Poll on the executor of a pending operation.
      for (fifo* f : active_)
        for (wait_entry* e : f->entries)
          if (e->op && !ex) ex = e->op->io_work;
      if (ex) schedule_executor_poll_locked(*ex);
      return;
    }
  }
  if (p.mode == poll_mode::poller_thread) {
    if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
    poller::instance().submitted();
  }
}

poll_policy wait_queues::policy() const {
  std::lock_guard lock(mutex_);
  return policy_;
}

completion_service::statistics wait_queues::stats() const {
  std::lock_guard lock(mutex_);
  completion_service::statistics s = stats_;
  s.active_queues = active_.size();
  return s;
}

// ---- poller ---------------------------------------------------------------------------------------------------

poller& poller::instance() {
  // Never destroyed: services may shut down during static destruction.
  static poller* p = new poller;
  return *p;
}

void poller::add(std::shared_ptr<wait_queues> q) {
  {
    std::lock_guard lock(mutex_);
    list_.push_back(std::move(q));
    wake_flag_ = true;  // an orphan's tokens may already be done: make the thread look
    if (running_) {
      cv_.notify_one();
      return;
    }
    running_ = true;
    thread_ = std::thread([this, g = ++generation_] { run(g); });
  }
}

void poller::adopt_orphan(std::shared_ptr<wait_queues> q) { add(std::move(q)); }

void poller::remove(const wait_queues* q, bool keep_as_orphan) {
  std::thread stopped;
  {
    std::lock_guard lock(mutex_);
    if (!keep_as_orphan)
      std::erase_if(list_, [&](const std::shared_ptr<wait_queues>& p) { return p.get() == q; });
    if (list_.empty() && running_) {
      running_ = false;
      stopped_generation_ = generation_;
      wake_flag_ = true;
      stopped = std::move(thread_);
    }
  }
  cv_.notify_all();
  if (stopped.joinable()) stopped.join();
}

void poller::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_flag_ = true;
  }
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_one();
}

void poller::run(std::uint64_t generation) {
  // Short sleeps stay short: the default 50 µs timer slack would stretch a 10 µs sleep to ~50 µs.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::vector<std::shared_ptr<wait_queues>> snapshot;
  for (;;) {
    const std::uint64_t seen = submissions_.load(std::memory_order_seq_cst);
    {
      std::lock_guard lock(mutex_);
      if (stopped_generation_ >= generation) return;
      snapshot = list_;
    }
    std::optional<std::chrono::nanoseconds> delay;
    for (auto& q : snapshot) {
      if (!q->polled_by_thread()) continue;
      std::optional<std::chrono::nanoseconds> d = q->poller_pass();
      if (d) delay = delay ? std::min(*delay, *d) : *d;
    }
    {
      // Orphans (shut-down services) leave once their tokens are all done.
      std::lock_guard lock(mutex_);
      std::erase_if(list_, [](const std::shared_ptr<wait_queues>& p) { return p->drained_orphan(); });
    }
    snapshot.clear();
    if (delay && delay->count() == 0) continue;  // spin window
    std::unique_lock lock(mutex_);
    sleeping_.store(true, std::memory_order_seq_cst);
    if (submissions_.load(std::memory_order_seq_cst) == seen && !wake_flag_) {
      if (delay)
        cv_.wait_for(lock, *delay, [&] { return wake_flag_ || stopped_generation_ >= generation; });
      else
        cv_.wait(lock, [&] { return wake_flag_ || stopped_generation_ >= generation; });  // idle: zero CPU
    }
    wake_flag_ = false;
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace detail

// ---- completion_service -----------------------------------------------------------------------------------------

completion_service::completion_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx), queues_(std::make_shared<detail::wait_queues>()) {}

completion_service::~completion_service() = default;

void completion_service::shutdown() { queues_->shutdown(); }

void completion_service::set_policy(const poll_policy& policy) { queues_->set_policy(policy); }
poll_policy completion_service::policy() const { return queues_->policy(); }
completion_service::statistics completion_service::stats() const { return queues_->stats(); }

void completion_service::start_wait(asio::any_io_executor io_executor, wait_target target,
                                    detail::wait_handler handler) {
  queues_->start(std::move(io_executor), std::move(target), std::move(handler));
}

void completion_service::fail_wait(asio::any_io_executor io_executor, std::error_code error,
                                   detail::wait_handler handler) {
  queues_->fail(std::move(io_executor), error, std::move(handler));
}

std::size_t completion_service::poll_once() { return queues_->pass(false, false); }

}  // namespace cuasync
