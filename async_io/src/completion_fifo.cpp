#include "completion_fifo.hpp"

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
      l.items.push_back(done[i]);
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
  for (lane* l : to_post) {
    try {
      // Posted with outstanding work held until post() returns: the io thread may run the drain, complete the last
      // operation and return from run() before post() has finished here (Asio signals its condition variable after
      // unlocking), and the context's owner may then destroy it under this thread (TSan saw it in CI).
      const asio::any_io_executor working = asio::prefer(l->ex, asio::execution::outstanding_work.tracked);
      asio::post(working, [self = shared_from_this(), l] { self->drain(l); });
    } catch (...) {
    }
  }
  return to_post.size();
}

void completion_fifo::drain(lane* l) {
  const long long end = completion_queues::now_ns() + run_budget_ns;
  do {
    completed_wait item;
    {
      std::lock_guard lock(mutex_);
      if (l->items.empty()) break;
      item = l->items.front();
      l->items.pop_front();
    }
    try {
      dispatch_to_handler(op_ptr(op_of(item)), item.error);
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
  std::vector<completed_wait> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& l : lanes_) {
      all.insert(all.end(), l->items.begin(), l->items.end());
      l->items.clear();
    }
  }
  for (const completed_wait& c : all) op_ptr destroy(op_of(c));
}

}  // namespace cuasync::detail
