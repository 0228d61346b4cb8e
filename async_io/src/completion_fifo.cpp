// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "completion_fifo.hpp"

#include "service_queues.hpp"

#include <boost/asio/execution.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <cstdlib>

namespace asio = boost::asio;

namespace cuasync::detail {

namespace {
wait_op* op_of(const completed_wait& c) noexcept { return static_cast<wait_op*>(c.wait); }

// A list that keeps its first items inline (a pass's lanes to post to: usually one).
template <class T>
class small_list {
 public:
  void push_back(T v) {  // @throws std::bad_alloc past the inline items
    if (n_ < inline_items)
      inline_[n_] = v;
    else
      more_.push_back(v);
    ++n_;
  }
  std::size_t size() const noexcept { return n_; }
  template <class F>
  void for_each(F f) const {
    for (std::size_t i = 0; i < n_; ++i) f(i < inline_items ? inline_[i] : more_[i - inline_items]);
  }

 private:
  static constexpr std::size_t inline_items = 8;
  T inline_[inline_items];
  std::vector<T> more_;
  std::size_t n_ = 0;
};

// Allocates from a lane's drain_memory (its one slot, else the heap).
template <class T>
struct drain_allocator {
  using value_type = T;
  drain_memory* memory;
  explicit drain_allocator(drain_memory* m) noexcept : memory(m) {}
  template <class U>
  drain_allocator(const drain_allocator<U>& o) noexcept : memory(o.memory) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes <= sizeof memory->bytes && alignof(T) <= alignof(std::max_align_t) && !memory->in_use.exchange(true))
      return reinterpret_cast<T*>(memory->bytes);
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, std::size_t) noexcept {
    if (reinterpret_cast<unsigned char*>(p) == memory->bytes)
      memory->in_use.store(false);
    else
      ::operator delete(p);
  }
  template <class U>
  bool operator==(const drain_allocator<U>& o) const noexcept {
    return memory == o.memory;
  }
};
// A lane's executor holds no outstanding work (the operations in it hold theirs): run() returns once they are done.
asio::any_io_executor untracked(const asio::any_io_executor& ex) {
  return asio::prefer(ex, asio::execution::outstanding_work.untracked);
}
}  // namespace

long long completion_fifo::run_budget_ns() noexcept {
  static const long long budget = [] {
    const char* v = std::getenv("CUASYNC_DRAIN_BUDGET_US");
    const long long us = v ? std::atoll(v) : 0;
    return us >= 10 && us <= 100'000 ? us * 1000 : 250'000LL;
  }();
  return budget;
}

bool completion_fifo::idle(const asio::any_io_executor& ex) const {
  const asio::any_io_executor key = untracked(ex);
  std::lock_guard lock(mutex_);
  for (const auto& l : lanes_)
    if (l->ex == key) return l->items.empty() && !l->drain_posted;
  return true;
}

completion_fifo::lane& completion_fifo::lane_for_locked(const asio::any_io_executor& ex) {
  const asio::any_io_executor key = untracked(ex);
  for (auto& l : lanes_)
    if (l->ex == key) return *l;
  lanes_.push_back(std::make_unique<lane>());
  lanes_.back()->ex = key;
  return *lanes_.back();
}

std::size_t completion_fifo::push(std::vector<completed_wait>& done, std::size_t first,
                                  const asio::any_io_executor* on, claim* claimed) noexcept {
  small_list<lane*> to_post;  // lanes are few (one per executor): no allocation per push
  std::size_t i = first;
  try {
    std::lock_guard lock(mutex_);
    lane* own = on ? &lane_for_locked(*on) : nullptr;
    for (; i < done.size(); ++i) {
      lane& l = lane_for_locked(op_of(done[i])->io_work);
      l.items.push_back(item{op_of(done[i]), done[i].error, {}, false});
      if (!l.drain_posted) {
        l.drain_posted = true;
        if (&l == own)
          claimed->l_ = own;  // drained by the caller, at once
        else
          to_post.push_back(&l);
      }
    }
  } catch (...) {
    for (; i < done.size(); ++i) {  // out of memory: each on its own
      try {
        post_to_io(op_ptr(op_of(done[i])), done[i].error);
      } catch (...) {
      }
    }
  }
  to_post.for_each([&](lane* l) { post_drain(l); });
  return to_post.size();
}

bool completion_fifo::push_admitted(wait_op* op, admission_ticket& ticket) noexcept {
  lane* to_post = nullptr;
  try {
    std::lock_guard lock(mutex_);
    lane& l = lane_for_locked(op->io_work);
    l.items.push_back(item{});  // may throw: before the ticket moves
    l.items.back() = item{op, {}, std::move(ticket), true};
    if (!l.drain_posted) {
      l.drain_posted = true;
      to_post = &l;
    }
  } catch (...) {
    return false;  // nothing was queued, and the ticket is still the caller's
  }
  if (to_post) post_drain(to_post);
  return true;
}

// The drain of a lane, posted to its executor; its memory comes from the lane (no allocation per post).
struct completion_fifo::drain_handler {
  std::shared_ptr<completion_fifo> self;
  lane* l;
  using allocator_type = drain_allocator<drain_handler>;
  allocator_type get_allocator() const noexcept { return allocator_type(&l->memory); }
  void operator()() { self->drain(l); }
};

void completion_fifo::post_drain(lane* l) noexcept {
  try {
    // Posted with outstanding work held until post() returns: the io thread may run the drain, complete the last
    // operation and return from run() before post() has finished here (Asio signals its condition variable after
    // unlocking), and the context's owner may then destroy it under this thread (TSan saw it in CI).
    // An io_context's executor uses the handler's allocator; through any_io_executor (which cannot carry one) the
    // handler would be allocated from the heap on this thread, once per post.
    if (const auto* io = l->ex.target<asio::io_context::executor_type>()) {
      asio::post(asio::prefer(*io, asio::execution::outstanding_work.tracked), drain_handler{shared_from_this(), l});
      return;
    }
    const asio::any_io_executor working = asio::prefer(l->ex, asio::execution::outstanding_work.tracked);
    asio::post(working, drain_handler{shared_from_this(), l});
  } catch (...) {
  }
}

void completion_fifo::run(item& it) {
  if (!it.admitted) return dispatch_to_handler(op_ptr(it.op), it.error);
  if (it.op->task)
    it.op->owner->run_task(it.op, true, nullptr, std::move(it.ticket));
  else
    it.op->owner->run_admitted(it.op, true, nullptr, std::move(it.ticket));
}

void completion_fifo::drain(lane* l, std::atomic<long long>* alive) {
  // Two lock acquisitions for a drain of one item (take it; after it ran, see that nothing followed and end), where
  // taking each item and then seeing the queue empty cost three.
  const long long end = completion_queues::now_ns() + run_budget_ns();
  item it;
  {
    std::lock_guard lock(mutex_);
    if (l->items.empty()) {
      l->drain_posted = false;
      return;
    }
    it = std::move(l->items.front());
    l->items.pop_front();
  }
  for (;;) {
    try {
      run(it);
    } catch (...) {
      // A handler threw: the rest stay queued (not lost, none run twice) for a drain posted again.
      std::lock_guard lock(mutex_);
      if (l->items.empty())
        l->drain_posted = false;
      else
        asio::post(l->ex, [self = shared_from_this(), l] { self->drain(l); });
      throw;
    }
    const long long now = completion_queues::now_ns();
    if (alive) alive->store(now, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    if (l->items.empty()) {
      l->drain_posted = false;
      return;
    }
    if (now >= end) {
      asio::post(l->ex, [self = shared_from_this(), l] { self->drain(l); });  // the rest after the others' handlers
      return;
    }
    it = std::move(l->items.front());
    l->items.pop_front();
  }
}

void completion_fifo::clear() noexcept {
  std::vector<item> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& l : lanes_) {
      for (item& it : l->items) all.push_back(std::move(it));
      l->items.clear();
    }
  }
  for (item& it : all) {
    if (it.admitted)
      it.op->owner->abandon(it.op);  // its place goes back with the ticket
    else
      op_ptr destroy(it.op);
  }
}

}  // namespace cuasync::detail
