#include "wait_op.hpp"

#include <cuasync/engine/detail/block_cache.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <algorithm>

namespace asio = boost::asio;

namespace cuasync::detail {
namespace {

using op_cache = block_cache<sizeof(wait_op)>;
using op_allocator = std::allocator_traits<asio::associated_allocator_t<wait_handler>>::rebind_alloc<wait_op>;

// Destroys `op` and frees its memory, leaving the handler in the result.
wait_handler free_op(wait_op* op) noexcept {
  wait_handler h = std::move(op->handler);
  if (op->cached) {
    op->~wait_op();
    op_cache::free(op);
    return h;
  }
  op_allocator alloc(asio::get_associated_allocator(h));
  op->~wait_op();
  std::allocator_traits<op_allocator>::deallocate(alloc, op, 1);
  return h;
}

// Runs on the handler's associated executor: free the state, then call the handler.
void invoke(op_ptr o, std::error_code ec) {
  wait_op* op = o.release();
  if (op->slot.is_connected()) op->slot.clear();
  wait_handler h = free_op(op);
  std::move(h)(ec);
}

// Completions of one pass for one I/O executor, handed over with one post and run in order. Destroyed without
// being run (shutdown), it destroys the handlers it still holds without calling them; a handler that throws leaves
// the rest posted again (never lost, never run twice).
class completion_batch {
 public:
  completion_batch() = default;
  completion_batch(completion_batch&& o) noexcept : items_(std::move(o.items_)), next_(std::exchange(o.next_, 0)) {
    o.items_.clear();
  }
  completion_batch& operator=(completion_batch&&) = delete;
  ~completion_batch() {
    for (std::size_t i = next_; i < items_.size(); ++i) op_ptr destroy(static_cast<wait_op*>(items_[i].wait));
  }
  void add(const completed_wait& d) { items_.push_back(d); }
  const asio::any_io_executor& executor() const noexcept { return op(0)->io_work; }

  void operator()() {
    // A bounded run, then the rest goes to the back of the executor's queue: other handlers (a framework's timers)
    // never wait behind more than `inline_completions` of these.
    for (std::size_t run = 0; next_ < items_.size(); ++run) {
      if (run == inline_completions) return post_rest();
      const completed_wait it = items_[next_++];
      try {
        dispatch_to_handler(op_ptr(static_cast<wait_op*>(it.wait)), it.error);
      } catch (...) {
        post_rest();
        throw;
      }
    }
  }

 private:
  wait_op* op(std::size_t i) const noexcept { return static_cast<wait_op*>(items_[i].wait); }
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
  std::vector<completed_wait> items_;
  std::size_t next_ = 0;
};

}  // namespace

wait_op* make_op(const asio::any_io_executor& io_ex, wait_handler h, wait_hints hints) {
  op_allocator alloc(asio::get_associated_allocator(h));
  void* p = hints.default_allocator ? op_cache::allocate() : std::allocator_traits<op_allocator>::allocate(alloc, 1);
  try {
    asio::any_completion_executor handler_work;
    if (!hints.handler_on_io) {
      asio::any_completion_executor handler_ex = asio::get_associated_executor(h, io_ex);
      handler_work = asio::prefer(handler_ex, asio::execution::outstanding_work.tracked);
    }
    asio::any_io_executor io_work = asio::prefer(io_ex, asio::execution::outstanding_work.tracked);
    return new (p) wait_op(std::move(h), std::move(io_work), std::move(handler_work), hints.default_allocator);
  } catch (...) {
    if (hints.default_allocator)
      op_cache::free(p);
    else
      std::allocator_traits<op_allocator>::deallocate(alloc, static_cast<wait_op*>(p), 1);
    throw;
  }
}

op_ptr::~op_ptr() {
  if (p_) {
    if (p_->slot.is_connected()) p_->slot.clear();
    free_op(p_);
  }
}

void dispatch_to_handler(op_ptr o, std::error_code ec) {
  if (!o.get()->handler_work) return invoke(std::move(o), ec);
  asio::any_completion_executor ex = o.get()->handler_work;
  asio::dispatch(ex, [o = std::move(o), ec]() mutable { invoke(std::move(o), ec); });
}

void post_to_io(op_ptr o, std::error_code ec) {
  asio::any_io_executor io = o.get()->io_work;
  asio::post(io, [o = std::move(o), ec]() mutable { dispatch_to_handler(std::move(o), ec); });
}

void complete_on_poll_executor(op_ptr o, std::error_code ec) {
  wait_op* op = o.get();
  if (op->on_poll_executor) return dispatch_to_handler(std::move(o), ec);
  // Another executor of the same context (e.g. a strand): let it decide whether this thread may run the handler.
  asio::any_io_executor io = op->io_work;
  asio::dispatch(io, [o = std::move(o), ec]() mutable { dispatch_to_handler(std::move(o), ec); });
}

std::size_t post_batches(std::vector<completed_wait>& done, std::size_t first) {
  // Usually one I/O executor; the groups keep each executor's completions in pass order.
  std::vector<completion_batch> batches;
  std::size_t taken = 0;
  try {
    for (taken = first; taken < done.size(); ++taken) {
      const auto* op = static_cast<wait_op*>(done[taken].wait);
      auto it = std::find_if(batches.begin(), batches.end(),
                             [&](const completion_batch& b) { return b.executor() == op->io_work; });
      if (it == batches.end()) {
        batches.emplace_back();
        it = batches.end() - 1;
      }
      it->add(done[taken]);
    }
  } catch (...) {
    // Out of memory while grouping: the rest go one by one.
    for (std::size_t i = taken; i < done.size(); ++i)
      post_to_io(op_ptr(static_cast<wait_op*>(done[i].wait)), done[i].error);
  }
  for (completion_batch& b : batches) {
    asio::any_io_executor io = b.executor();
    asio::post(io, std::move(b));
  }
  return batches.size();
}

}  // namespace cuasync::detail
