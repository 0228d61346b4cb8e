#include "completion_fifo.hpp"

#include "service_queues.hpp"

#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

namespace asio = boost::asio;

namespace cuasync::detail {

namespace {
wait_op* op_of(const completed_wait& c) noexcept { return static_cast<wait_op*>(c.wait); }
// A lane's executor holds no outstanding work (the operations in it hold theirs): run() returns once they are done.
asio::any_io_executor untracked(const asio::any_io_executor& ex) {
  return asio::prefer(ex, asio::execution::outstanding_work.untracked);
}
}  // namespace

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

std::size_t completion_fifo::push(std::vector<completed_wait>& done, std::size_t first) noexcept {
  std::vector<lane*> to_post;
  std::size_t i = first;
  try {
    std::lock_guard lock(mutex_);
    for (; i < done.size(); ++i) {
      lane& l = lane_for_locked(op_of(done[i])->io_work);
      l.items.push_back(item{op_of(done[i]), done[i].error, {}, false});
      if (!l.drain_posted) {
        l.drain_posted = true;
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
  for (lane* l : to_post) post_drain(l);
  return to_post.size();
}

bool completion_fifo::push_admitted(wait_op* op, admission_ticket& ticket) noexcept {
  lane* to_post = nullptr;
  try {
    std::lock_guard lock(mutex_);
    lane& l = lane_for_locked(op->io_work);
    l.items.emplace_back();  // may throw: before the ticket moves
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

void completion_fifo::post_drain(lane* l) noexcept {
  try {
    // Posted with outstanding work held until post() returns: the io thread may run the drain, complete the last
    // operation and return from run() before post() has finished here (Asio signals its condition variable after
    // unlocking), and the context's owner may then destroy it under this thread (TSan saw it in CI).
    const asio::any_io_executor working = asio::prefer(l->ex, asio::execution::outstanding_work.tracked);
    asio::post(working, [self = shared_from_this(), l] { self->drain(l); });
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

void completion_fifo::drain(lane* l) {
  const long long end = completion_queues::now_ns() + run_budget_ns;
  do {
    item it;
    {
      std::lock_guard lock(mutex_);
      if (l->items.empty()) break;
      it = std::move(l->items.front());
      l->items.pop_front();
    }
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
  } while (completion_queues::now_ns() < end);
  std::lock_guard lock(mutex_);
  if (l->items.empty()) {
    l->drain_posted = false;
    return;
  }
  asio::post(l->ex, [self = shared_from_this(), l] { self->drain(l); });  // the rest after the others' handlers
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
