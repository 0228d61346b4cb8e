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

// A per-thread cache of blocks for T: the state of every wait is allocated and freed on the io thread in the common
// case, so recycling here replaces two malloc/free pairs per wait. Trivially destructible, so that a block freed
// during static destruction (after the thread's cache closed) still finds it; it then goes back to the heap.
template <class T>
struct block_cache {
  static constexpr unsigned capacity = 256;
  void* blocks[capacity];
  unsigned size;
  bool closed;
};
template <class T>
block_cache<T>& cache() noexcept {
  thread_local block_cache<T> c{};
  return c;
}
template <class T>
struct cache_closer {
  ~cache_closer() {
    block_cache<T>& c = cache<T>();
    c.closed = true;
    while (c.size) ::operator delete(c.blocks[--c.size]);
  }
};
template <class T>
void* cache_allocate() {
  block_cache<T>& c = cache<T>();
  if (c.size) return c.blocks[--c.size];
  if (!c.closed) {
    thread_local cache_closer<T> closer;  // frees the cached blocks when the thread exits
    (void)closer;
  }
  return ::operator new(sizeof(T));
}
template <class T>
void cache_free(void* p) noexcept {
  block_cache<T>& c = cache<T>();
  if (!c.closed && c.size < block_cache<T>::capacity)
    c.blocks[c.size++] = p;
  else
    ::operator delete(p);
}

wait_entry* new_entry(wait_target& t) {
  void* p = cache_allocate<wait_entry>();
  return new (p) wait_entry{t.source, t.token, t.group, t.order, std::move(t.keep_alive), nullptr};
}
void delete_entry(wait_entry* e) noexcept {
  e->~wait_entry();
  cache_free<wait_entry>(e);
}

// Destroys `op` and frees its memory, leaving the handler in the result.
wait_handler free_op(wait_op* op) noexcept {
  wait_handler h = std::move(op->handler);
  if (op->cached) {
    op->~wait_op();
    cache_free<wait_op>(op);
    return h;
  }
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

// On the I/O executor: to the handler's executor (nothing more to do when that is the I/O executor).
void dispatch_to_handler(op_ptr o, std::error_code ec) {
  if (!o.get()->handler_work) return invoke(std::move(o), ec);
  asio::any_completion_executor ex = o.get()->handler_work;
  asio::dispatch(ex, [o = std::move(o), ec]() mutable { invoke(std::move(o), ec); });
}

// From a thread that is not the I/O executor's (the poller, a cancelling thread, the initiating function): post to
// the I/O executor, which dispatches to the handler's executor. Never inline.
void post_to_io(op_ptr o, std::error_code ec) {
  asio::any_io_executor io = o.get()->io_work;
  asio::post(io, [o = std::move(o), ec]() mutable { dispatch_to_handler(std::move(o), ec); });
}

// Completions of one pass for one I/O executor, handed over with one post and run in order. Destroyed without
// being run (shutdown), it destroys the handlers it still holds without calling them; a handler that throws leaves
// the rest posted again (never lost, never run twice).
class completion_batch {
 public:
  struct item {
    wait_op* op;
    std::error_code ec;
  };
  completion_batch() = default;
  completion_batch(completion_batch&& o) noexcept : items_(std::move(o.items_)), next_(std::exchange(o.next_, 0)) {
    o.items_.clear();
  }
  completion_batch& operator=(completion_batch&&) = delete;
  ~completion_batch() {
    for (std::size_t i = next_; i < items_.size(); ++i) op_ptr destroy(items_[i].op);
  }
  void add(wait_op* op, std::error_code ec) { items_.push_back({op, ec}); }
  const asio::any_io_executor& executor() const noexcept { return items_.front().op->io_work; }
  std::size_t size() const noexcept { return items_.size(); }

  void operator()() {
    while (next_ < items_.size()) {
      const item it = items_[next_++];
      try {
        dispatch_to_handler(op_ptr(it.op), it.ec);
      } catch (...) {
        post_rest();
        throw;
      }
    }
  }

 private:
  void post_rest() noexcept {
    if (next_ >= items_.size()) return;
    try {
      completion_batch rest;
      rest.items_.assign(items_.begin() + static_cast<std::ptrdiff_t>(next_), items_.end());
      next_ = items_.size();  // the rest belongs to `rest` now (destroyed unrun if the post fails)
      asio::any_io_executor io = rest.executor();
      asio::post(io, std::move(rest));
    } catch (...) {
    }
  }
  std::vector<item> items_;
  std::size_t next_ = 0;
};

// From a pass run by the service's poll executor.
void complete_on_poll_executor(op_ptr o, std::error_code ec) {
  wait_op* op = o.get();
  if (op->on_poll_executor) return dispatch_to_handler(std::move(o), ec);
  // Another executor of the same context (e.g. a strand): let it decide whether this thread may run the handler.
  asio::any_io_executor io = op->io_work;
  asio::dispatch(io, [o = std::move(o), ec]() mutable { dispatch_to_handler(std::move(o), ec); });
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

// Reusable per-thread vectors for a pass's results; taken out while in use, so a handler that runs a nested pass
// (poll_once from inside a handler) gets fresh ones.
template <class T>
std::vector<T>& scratch_slot() {
  thread_local std::vector<T> v;
  return v;
}
template <class T>
std::vector<T> take_scratch() {
  std::vector<T> out = std::move(scratch_slot<T>());
  out.clear();
  return out;
}
template <class T>
void give_scratch(std::vector<T>&& used) {
  std::vector<T>& v = scratch_slot<T>();
  used.clear();
  if (used.capacity() > v.capacity()) v = std::move(used);
}

}  // namespace

// ---- wait_queues ----------------------------------------------------------------------------------------------

wait_queues::wait_queues() : policy_(initial_policy()) { note_activity(); }

wait_queues::~wait_queues() {
  for (auto& [key, f] : queues_)
    for (wait_entry* e : f.entries) {
      e->source->release(e->token);
      delete_entry(e);
    }
}

wait_op* wait_queues::make_op(asio::any_io_executor io_ex, wait_handler h, wait_hints hints) {
  op_allocator alloc(asio::get_associated_allocator(h));
  wait_op* op = hints.default_allocator ? static_cast<wait_op*>(cache_allocate<wait_op>())
                                        : std::allocator_traits<op_allocator>::allocate(alloc, 1);
  try {
    asio::any_completion_executor handler_work;
    if (!hints.handler_on_io) {
      asio::any_completion_executor handler_ex = asio::get_associated_executor(h, io_ex);
      handler_work = asio::prefer(handler_ex, asio::execution::outstanding_work.tracked);
    }
    asio::any_io_executor io_work = asio::prefer(io_ex, asio::execution::outstanding_work.tracked);
    new (op) wait_op{std::move(h), std::move(io_work), std::move(handler_work), {}, nullptr, nullptr,
                     hints.default_allocator, false};
  } catch (...) {
    if (hints.default_allocator)
      cache_free<wait_op>(op);
    else
      std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
    throw;
  }
  return op;
}

void wait_queues::start(asio::any_io_executor io_ex, wait_target t, wait_handler h, wait_hints hints) {
  if (!t.source) throw std::invalid_argument("cuasync::completion_service::start_wait: no completion source");
  wait_op* op = make_op(io_ex, std::move(h), hints);
  wait_entry* e;
  try {
    e = new_entry(t);
  } catch (...) {
    op_ptr destroy(op);
    throw;
  }
  e->op = op;
  bool wake_thread = false;
  {
    std::unique_lock lock(mutex_);
    if (shut_down_) {
      lock.unlock();
      e->source->release(e->token);
      delete_entry(e);
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
    if (f.entries.empty()) f.ordered = true;
    if (e->order == 0) f.ordered = false;
    if (!f.ordered || f.entries.empty() || f.entries.back()->order < e->order) {
      f.entries.push_back(e);
    } else {
      // Recorded before entries already queued (a lazily started wait): keep the FIFO in recording order.
      auto pos = std::upper_bound(f.entries.begin(), f.entries.end(), e->order,
                                  [](std::uint64_t o, const wait_entry* x) { return o < x->order; });
      f.entries.insert(pos, e);
    }
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
    if (!poll_executor_) poll_executor_ = io_ex;
    op->on_poll_executor = io_ex == *poll_executor_;
    if (policy_.mode == poll_mode::in_executor || (executor_window_locked() && !offloaded_locked())) {
      if (!task_scheduled_) {
        schedule_executor_poll_locked(io_ex);
        // The thread learns that it may have to take over if the executor does not poll (executor window).
        wake_thread = policy_.mode == poll_mode::poller_thread;
      }
    } else {
      wake_thread = true;
    }
  }
  if (wake_thread) hand_to_thread();
}

void wait_queues::hand_to_thread() {
  if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
  poller::instance().submitted();
}

void wait_queues::fail(asio::any_io_executor io_ex, std::error_code ec, wait_handler h) {
  wait_op* op = make_op(std::move(io_ex), std::move(h), {});
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
    done.push_back({op, ec, e->group});
  }
}

void wait_queues::fail_group_locked(std::uintptr_t group, std::error_code ec, std::vector<finished>& done,
                                    std::vector<wait_entry*>& released) {
  failed_groups_.emplace_back(group, ec);
  for (fifo* f : active_) {
    if (f->group != group) continue;
    for (wait_entry* e : f->entries) {
      take_locked(e, ec, done);
      released.push_back(e);
    }
    f->entries.clear();
  }
}

void wait_queues::finish_locked(fifo& f, wait_entry* e, const poll_result& r, std::vector<finished>& done,
                                std::vector<wait_entry*>& released) {
  // Usually the head; an entry inserted before it since the snapshot (sorted insertion) moves it back.
  if (!f.entries.empty() && f.entries.front() == e)
    f.entries.pop_front();
  else
    f.entries.erase(std::find(f.entries.begin(), f.entries.end(), e));
  take_locked(e, r.status == poll_status::failed ? r.error : std::error_code(), done);
  released.push_back(e);
  if (r.status == poll_status::failed && r.scope == failure_scope::group)
    fail_group_locked(e->group, r.error, done, released);
}

// Head-only pass. Entries are only removed by passes (serialised by pass_mutex_) and FIFOs only erased by them, so
// the snapshot's entries stay valid without the lock, except after a group failure, which empties other FIFOs.
void wait_queues::head_pass(std::uint64_t& queries, std::vector<finished>& done,
                            std::vector<wait_entry*>& released) {
  {
    std::lock_guard lock(mutex_);
    scratch_.clear();
    for (fifo* f : active_)
      if (!f->entries.empty())
        scratch_.push_back({f, f->entries.front(), f->ordered && f->entries.size() > 1 ? f->entries.back() : nullptr});
  }
  bool group_failed = false;
  for (head& h : scratch_) {
    fifo& f = *h.f;
    if (group_failed) {
      std::lock_guard lock(mutex_);
      if (f.entries.empty()) continue;
      h = {&f, f.entries.front(), f.ordered && f.entries.size() > 1 ? f.entries.back() : nullptr};
    }
    wait_entry* e = h.oldest;
    if (h.newest) {
      // Ordered: one query of the newest answers for every entry recorded before it.
      const poll_result r = h.newest->source->query(h.newest->token);
      ++queries;
      if (r.status != poll_status::pending) {
        std::lock_guard lock(mutex_);
        if (finish_run_locked(f, h.newest->order, r, done, released)) group_failed = true;
        continue;
      }
      // Pending: the done prefix (if any) is found with O(log n) queries.
      if (search_ordered(f, h.newest->order, queries, done, released, group_failed)) continue;
      std::lock_guard lock(mutex_);  // no longer ordered: from the head
      e = f.entries.empty() || f.entries.front() == h.newest ? nullptr : f.entries.front();
    }
    // Entry by entry from the head; stop at the first pending one.
    while (e && e != h.newest) {
      const poll_result r = e->source->query(e->token);
      ++queries;
      if (r.status == poll_status::pending) break;
      std::lock_guard lock(mutex_);
      finish_locked(f, e, r, done, released);
      if (r.status == poll_status::failed && r.scope == failure_scope::group) group_failed = true;
      e = f.entries.empty() ? nullptr : f.entries.front();
    }
  }
}

bool wait_queues::finish_run_locked(fifo& f, std::uint64_t last, const poll_result& r, std::vector<finished>& done,
                                    std::vector<wait_entry*>& released) {
  const std::error_code ec = r.status == poll_status::failed ? r.error : std::error_code();
  while (!f.entries.empty() && f.entries.front()->order != 0 && f.entries.front()->order <= last) {
    wait_entry* e = f.entries.front();
    f.entries.pop_front();
    take_locked(e, ec, done);
    released.push_back(e);
  }
  if (r.status == poll_status::failed && r.scope == failure_scope::group) {
    fail_group_locked(f.group, r.error, done, released);
    return true;
  }
  return false;
}

bool wait_queues::search_ordered(fifo& f, std::uint64_t bound, std::uint64_t& queries, std::vector<finished>& done,
                                 std::vector<wait_entry*>& released, bool& group_failed) {
  // A query of finished work costs ~10x one of pending work (1.26 against 0.11 µs on the H200), so the search makes
  // one finished query per FIFO and pass: it gallops back from the pending newest (pending probes are cheap) to the
  // first finished one, completes everything up to it and leaves the few between for the next pass. When the head
  // was pending at the last probe it is checked first: a FIFO of long waits then costs two queries a pass, however
  // many are pending (poll-pass cost grows with streams only).
  // Entries are only removed by passes (this one), so a probed entry stays valid without the lock; waits started
  // meanwhile may be inserted anywhere (sorted), hence the position is recomputed from `bound` each time.
  std::size_t distance = 1;
  bool head_first = f.head_pending;
  for (;;) {
    wait_entry* probe;
    std::size_t index;
    {
      std::lock_guard lock(mutex_);
      if (!f.ordered) return false;
      const auto end = std::lower_bound(f.entries.begin(), f.entries.end(), bound,
                                        [](const wait_entry* x, std::uint64_t o) { return x->order < o; });
      const auto unknown = static_cast<std::size_t>(end - f.entries.begin());
      if (unknown == 0) return true;
      index = head_first ? 0 : (unknown > distance ? unknown - distance : 0);
      probe = f.entries[index];
    }
    const poll_result r = probe->source->query(probe->token);
    ++queries;
    if (r.status == poll_status::pending) {
      if (index == 0) {
        f.head_pending = true;
        return true;  // the oldest is pending: so is everything after it
      }
      bound = probe->order;
      distance *= 2;
      continue;
    }
    std::lock_guard lock(mutex_);
    f.head_pending = false;
    if (finish_run_locked(f, probe->order, r, done, released)) group_failed = true;
    if (r.status == poll_status::failed || !head_first) return true;  // the next pass looks at the rest
    head_first = false;  // the head was done: gallop back from the pending bound to where the run ends
  }
}

// Every entry of every FIFO (the watchdog: a token that finished out of queue order).
void wait_queues::full_pass(std::uint64_t& queries, std::vector<finished>& done,
                            std::vector<wait_entry*>& released) {
  {
    std::lock_guard lock(mutex_);
    scratch_full_.assign(active_.begin(), active_.end());
  }
  for (fifo* f : scratch_full_) {
    std::size_t i = 0;
    for (;;) {
      wait_entry* e;
      {
        std::lock_guard lock(mutex_);
        if (i >= f->entries.size()) break;
        e = f->entries[i];
      }
      const poll_result r = e->source->query(e->token);
      ++queries;
      if (r.status == poll_status::pending) {
        ++i;
        continue;
      }
      std::lock_guard lock(mutex_);
      finish_locked(*f, e, r, done, released);
    }
  }
}

std::size_t wait_queues::pass(bool full, bool from_io_thread) {
  std::vector<finished> done = take_scratch<finished>();
  std::vector<wait_entry*> released = take_scratch<wait_entry*>();
  {
    std::lock_guard pass_lock(pass_mutex_);
    std::uint64_t queries = 0;
    failed_groups_.clear();
    if (full)
      full_pass(queries, done, released);
    else
      head_pass(queries, done, released);
    std::lock_guard lock(mutex_);
    // A context fault aborts all of its work: an event on another stream of that context can then read as complete
    // (seen on the H200: a long kernel's event answered CUDA_SUCCESS beside the faulting stream's
    // CUDA_ERROR_ILLEGAL_ADDRESS). Whatever of a failed group completed in the same pass did not really succeed.
    if (!failed_groups_.empty())
      for (finished& d : done) {
        if (d.error) continue;
        for (const auto& [group, ec] : failed_groups_)
          if (d.group == group) {
            d.error = ec;
            --stats_.completed;
            ++stats_.failed;
            break;
          }
      }
    ++stats_.passes;
    if (from_io_thread) ++stats_.executor_passes;
    stats_.queries += queries;
    std::erase_if(active_, [&](fifo* f) {
      if (!f->entries.empty()) return false;
      f->listed = false;
      return true;
    });
    // Drained FIFOs stay in the map for the next wait on their stream; a crowd of idle ones is dropped.
    if (queues_.size() > active_.size() + 64)
      std::erase_if(queues_, [](const auto& kv) { return !kv.second.listed; });
    if (!done.empty()) note_activity();
  }
  // Outside the locks: give tokens back, drop keep-alives (user destructors), hand completions over.
  for (wait_entry* e : released) {
    e->source->release(e->token);
    delete_entry(e);
  }
  const std::size_t n = done.size();
  if (from_io_thread) {
    // Handlers dispatched inline are the io thread's own work, not polling (the executor's share).
    // Each handler run shows the executor alive: the poller thread takes over only when one handler outlasts the
    // executor window (a busy io thread launching the next batch is not a stopped one; polling from another thread
    // then contends with its launches inside the driver).
    const long long handover_start = done.empty() ? 0 : now_ns();
    for (finished& d : done) {
      complete_on_poll_executor(op_ptr(d.op), d.error);
      last_executor_pass_ns_.store(now_ns(), std::memory_order_relaxed);
    }
    if (handover_start) share_handler_ns_ += now_ns() - handover_start;
  } else if (!done.empty()) {
    const std::size_t posts = post_batches(done);
    std::lock_guard lock(mutex_);
    stats_.batches += posts;
  }
  give_scratch(std::move(done));
  give_scratch(std::move(released));
  return n;
}

std::size_t wait_queues::post_batches(std::vector<finished>& done) {
  // Usually one I/O executor; the groups keep each executor's completions in pass order.
  std::vector<completion_batch> batches;
  std::size_t taken = 0;
  try {
    for (; taken < done.size(); ++taken) {
      wait_op* op = done[taken].op;
      auto it = std::find_if(batches.begin(), batches.end(),
                             [&](const completion_batch& b) { return b.executor() == op->io_work; });
      if (it == batches.end()) {
        batches.emplace_back();
        it = batches.end() - 1;
      }
      it->add(op, done[taken].error);
    }
  } catch (...) {
    // Out of memory while grouping: the rest go one by one.
    for (std::size_t i = taken; i < done.size(); ++i) post_to_io(op_ptr(done[i].op), done[i].error);
  }
  const std::size_t posts = batches.size();
  for (completion_batch& b : batches) {
    asio::any_io_executor io = b.executor();
    asio::post(io, std::move(b));
  }
  return posts;
}

std::optional<std::chrono::nanoseconds> wait_queues::poller_pass() {
  {
    std::lock_guard lock(mutex_);
    if (active_.empty()) return std::nullopt;
    if (!shut_down_ && task_scheduled_ && executor_window_locked()) {
      // The executor polls; take over only when it has run no pass for a window (a busy or stopped io thread).
      const auto since = std::chrono::nanoseconds(now_ns() - last_executor_pass_ns_.load(std::memory_order_relaxed));
      if (since < policy_.executor_window)
        return std::max<std::chrono::nanoseconds>(policy_.executor_window - since, std::chrono::milliseconds(1));
    }
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
  const auto since = std::chrono::nanoseconds(now_ns() - last_activity_ns_.load(std::memory_order_relaxed));
  return policy_.next_delay(since);
}

void wait_queues::schedule_executor_poll_locked(const asio::any_io_executor& ex) {
  task_scheduled_ = true;
  last_executor_pass_ns_.store(now_ns(), std::memory_order_relaxed);
  share_prev_end_ns_ = share_poll_ns_ = share_other_ns_ = share_handler_ns_ = share_cycles_ = 0;  // measure anew
  if (!poll_executor_) poll_executor_ = ex;
  asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
}

bool wait_queues::over_share(long long start) {
  // Between two passes the io thread ran other handlers; during a pass it polled, and ran the handlers that the
  // pass dispatched inline. Decided over >= 200 µs of such cycles.
  if (share_prev_end_ns_ != 0) {
    share_other_ns_ += start - share_prev_end_ns_;
    ++share_cycles_;
  }
  if (share_other_ns_ + share_poll_ns_ < 200'000) return false;
  const long long poll = share_poll_ns_, other = share_other_ns_;
  const long long cycles = std::max<long long>(1, share_cycles_);
  share_poll_ns_ = share_other_ns_ = share_cycles_ = 0;
  std::lock_guard lock(mutex_);
  const unsigned percent = policy_.executor_share_percent;
  if (!executor_window_locked() || percent == 0) return false;
  // Busy (more of its time in other work than in polling, at least 1 µs of it between passes: a launch, not just the
  // scheduler) and over its share. An idle io thread polls for free.
  if (other <= poll || other < 1000 * cycles || poll * 100 <= other * static_cast<long long>(percent)) return false;
  offload_until_ns_ = start + policy_.executor_offload.count();
  ++stats_.offloads;
  return true;
}

void wait_queues::executor_poll() {
  const long long start = now_ns();
  last_executor_pass_ns_.store(start, std::memory_order_relaxed);
  struct share_meter {
    wait_queues* q;
    long long start;
    ~share_meter() {
      const long long end = now_ns();
      const long long handlers = std::exchange(q->share_handler_ns_, 0);
      q->share_poll_ns_ += end - start - handlers;
      q->share_other_ns_ += handlers;
      q->share_prev_end_ns_ = end;
    }
  };
  if (over_share(start)) {
    std::unique_lock lock(mutex_);
    task_scheduled_ = false;
    const bool hand_over = !shut_down_ && !active_.empty();
    lock.unlock();
    if (hand_over) hand_to_thread();
    return;
  }
  // Ends before the task is given up (a new task may then run on another thread of the executor).
  std::optional<share_meter> meter(std::in_place, share_meter{this, start});
  pass(watchdog_due(), true);
  std::unique_lock lock(mutex_);
  const bool in_executor = policy_.mode == poll_mode::in_executor;
  if (shut_down_ || active_.empty() || !in_executor) {
    // Within the executor window the executor keeps polling back to back, as in in_executor mode.
    if (!shut_down_ && !active_.empty() && executor_window_locked() &&
        std::chrono::nanoseconds(now_ns() - last_activity_ns_.load(std::memory_order_relaxed)) <
            policy_.executor_window) {
      asio::post(*poll_executor_, [self = shared_from_this()] { self->executor_poll(); });
      return;
    }
    meter.reset();
    task_scheduled_ = false;
    const bool hand_over = !shut_down_ && !active_.empty();  // window over, or switched to the poller thread
    if (hand_over && !in_executor) ++stats_.handoffs;
    lock.unlock();
    if (hand_over) hand_to_thread();
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
    offload_until_ns_ = 0;
    if ((p.mode == poll_mode::in_executor || executor_window_locked()) && !task_scheduled_) {
      // Poll on the executor of a pending operation.
      for (fifo* f : active_)
        for (wait_entry* e : f->entries)
          if (e->op && !ex) ex = e->op->io_work;
      if (ex) schedule_executor_poll_locked(*ex);
      if (p.mode == poll_mode::in_executor) return;
    }
  }
  if (p.mode == poll_mode::poller_thread) hand_to_thread();
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
                                    detail::wait_handler handler, detail::wait_hints hints) {
  queues_->start(std::move(io_executor), std::move(target), std::move(handler), hints);
}

void completion_service::fail_wait(asio::any_io_executor io_executor, std::error_code error,
                                   detail::wait_handler handler) {
  queues_->fail(std::move(io_executor), error, std::move(handler));
}

std::size_t completion_service::poll_once() { return queues_->pass(false, false); }

}  // namespace cuasync
