// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "wait_op.hpp"

#include <cuasync/driver/blocking_free.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include <string>
#include <string_view>

#include "failure_scope.hpp"

#include <cuasync/engine/detail/block_cache.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>


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

// "void ns::f(args)" -> "ns::f"; no function -> "file.cpp:line" (what a lane can show).
std::string awaited_from(const std::source_location& where) {
  std::string_view f = where.function_name() ? where.function_name() : "";
  if (const auto paren = f.find('('); paren != std::string_view::npos) f = f.substr(0, paren);
  if (const auto space = f.rfind(' '); space != std::string_view::npos) f = f.substr(space + 1);
  if (!f.empty()) return std::string(f);
  std::string_view file = where.file_name() ? where.file_name() : "";
  if (const auto slash = file.rfind('/'); slash != std::string_view::npos) file = file.substr(slash + 1);
  return file.empty() ? std::string() : std::string(file) + ":" + std::to_string(where.line());
}

// The await as a span on the initiating thread's lane, from initiation to the handler's call.
void record_await(const wait_op& op, std::error_code ec) noexcept {
  try {
    trace::span s;
    s.lane = trace::lane::host_thread(op.traced_thread);
    s.category = trace::category::await;
    s.begin_ns = op.traced_since;
    s.end_ns = trace::now_ns();
    const std::string from = awaited_from(op.where);
    s.name = std::string(ec ? "await (failed)" : "await") + (from.empty() ? "" : " " + from);
    trace::record(std::move(s));
  } catch (...) {
  }
}

// Runs on the handler's associated executor: free the state, then call the handler.
void invoke(op_ptr o, std::error_code ec) {
  // A thread that awaits must not block: a device_buffer or pinned_buffer the handler (a coroutine it resumes)
  // destroys is freed on the reaper thread (driver/blocking_free.hpp), not here in cuMemFree.
  must_not_block_scope awaiting;
  wait_op* op = o.release();
  if (op->slot.is_connected()) op->slot.clear();
  if (op->traced_since) [[unlikely]] record_await(*op, ec);
  if (!ec) {
    wait_handler h = free_op(op);
    return std::move(h)(ec);
  }
  // The handler sees only the code; failure_detail() (and the exception use_awaitable throws) tell the rest.
  failure_scope scope(ec, std::move(op->failure), op->stream, op->where);
  wait_handler h = free_op(op);
  std::move(h)(ec);
}

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
    auto* op = new (p) wait_op(std::move(h), std::move(io_work), std::move(handler_work), hints.default_allocator);
    op->where = hints.where;
    op->work_key = hints.work_key;
    if (trace::enabled()) [[unlikely]] {
      op->traced_since = trace::now_ns();
      op->traced_thread = trace::this_thread_lane().id;
    }
    return op;
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

}  // namespace cuasync::detail
