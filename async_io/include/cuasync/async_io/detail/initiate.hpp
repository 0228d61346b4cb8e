// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the one initiation behind every async_io operation, with the `void(std::error_code)` signature; the
// starters are what each operation does once the handler is known.
#include <cuasync/async_io/completion_service.hpp>
#include <cuasync/async_io/error_tokens.hpp>

#include <cuasync/engine/cuda_completion_source.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace cuasync::detail {

//! Finds the I/O executor (the handler's associated executor, else `default_ex`) and its context's completion
//! service, erases the handler's type and lets `starter` start the operation.
struct initiate_op {
  const char* api;  //!< the operation's name, for the exception that use_awaitable / use_future raise on failure
  template <class Handler, class Starter>
  void operator()(Handler&& handler, const boost::asio::any_io_executor& default_ex, Starter&& starter) const {
    boost::asio::any_io_executor io_ex = boost::asio::get_associated_executor(handler, default_ex);
    auto& service = completion_service::of(boost::asio::query(io_ex, boost::asio::execution::context));
    // io_ex is the handler's own executor (or the default it would get): the service needs no second work guard.
    constexpr wait_hints hints{
        .handler_on_io = true,
        .default_allocator =
            std::is_same_v<boost::asio::associated_allocator_t<std::decay_t<Handler>>, std::allocator<void>>};
    std::forward<Starter>(starter)(service, std::move(io_ex), wait_handler(std::forward<Handler>(handler)), hints);
  }
};

//! Starts an operation with any completion token; its signature is `void(std::error_code)` (error_tokens.hpp).
template <class Starter, class Token>
auto initiate(const boost::asio::any_io_executor& ex, Starter&& starter, Token&& token, const char* api) {
  return boost::asio::async_initiate<Token, void(std::error_code)>(initiate_op{api}, token, ex,
                                                                    std::forward<Starter>(starter));
}

// ---- starters

//! A caller's event, already recorded.
struct event_starter {
  event_ref e;
  std::shared_ptr<void> keep_alive;
  std::source_location where;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    hints.where = where;
    s.start_wait(std::move(ex), cuda_completion_source::target(e, std::move(keep_alive)), std::move(h), hints);
  }
};
//! Everything enqueued on a stream so far: records a pooled event there (a failed record fails the wait).
struct stream_starter {
  stream_ref s;
  std::shared_ptr<void> keep_alive;
  std::source_location where;
  void operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) &&;
};
//! A pooled event already recorded.
struct pooled_starter {
  pooled_event e;
  std::shared_ptr<void> keep_alive;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    s.start_wait(std::move(ex), std::move(e).into_target(std::move(keep_alive)), std::move(h), hints);
  }
};
//! Any completion source's token.
struct target_starter {
  wait_target t;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    s.start_wait(std::move(ex), std::move(t), std::move(h), hints);
  }
};
//! Work to enqueue on a stream once admitted (`work(stream)` enqueues it and throws cuda_error on failure).
template <class Work>
struct operation_starter {
  stream_ref s;
  Work work;
  std::shared_ptr<void> keep_alive;
  std::source_location where;
  void operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    if constexpr (requires { work.work_key(); }) hints.work_key = work.work_key();
    svc.start_operation(std::move(ex), s, enqueue_ref::of(work), std::move(keep_alive), std::move(h), hints, where);
  }
};

}  // namespace cuasync::detail
