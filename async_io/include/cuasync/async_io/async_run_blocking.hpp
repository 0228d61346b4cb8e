// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_run_blocking`: run blocking CPU work (an NVRTC compile, file I/O) on a thread pool and complete on the
//! handler's executor, so an Asio thread never blocks. `async_compile` is this with a compile function.
//!
//! Completion signature `void(std::exception_ptr, R)` (`void(std::exception_ptr)` when `R` is void): the exception
//! the callable threw, or null and its result. With `use_awaitable`, `co_await` returns `R` or rethrows; with
//! `use_future`, `get()` does. Cancellation: not supported (the callable runs to completion). Never blocks; the
//! callable runs on `pool`, the handler on its associated executor (work is tracked there meanwhile).

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/thread_pool.hpp>

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace cuasync {

//! A process-wide pool for blocking work (half the hardware threads, at least 2), created on first use.
boost::asio::thread_pool& blocking_pool();

namespace detail {
template <class R>
struct blocking_signature {
  using type = void(std::exception_ptr, R);
};
template <>
struct blocking_signature<void> {
  using type = void(std::exception_ptr);
};

struct initiate_run_blocking {
  template <class Handler, class F>
  void operator()(Handler&& handler, boost::asio::thread_pool* pool, F&& f) const {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    auto work = boost::asio::prefer(boost::asio::get_associated_executor(handler),
                                    boost::asio::execution::outstanding_work.tracked);
    boost::asio::post(*pool, [h = std::forward<Handler>(handler), f = std::forward<F>(f),
                              work = std::move(work)]() mutable {
      std::exception_ptr error;
      if constexpr (std::is_void_v<R>) {
        try {
          f();
        } catch (...) {
          error = std::current_exception();
        }
        boost::asio::dispatch(work, [h = std::move(h), error]() mutable { std::move(h)(error); });
      } else {
        std::optional<R> result;
        try {
          result.emplace(f());
        } catch (...) {
          error = std::current_exception();
        }
        if (!result) result.emplace();
        boost::asio::dispatch(work, [h = std::move(h), error, r = std::move(*result)]() mutable {
          std::move(h)(error, std::move(r));
        });
      }
    });
  }
};
}  // namespace detail

//! Runs `f()` on `pool` and completes with its result or exception. `R` (f's result) must be default-constructible
//! (it is passed, default-constructed, along with an exception).
template <class F, class Token>
auto async_run_blocking(boost::asio::thread_pool& pool, F&& f, Token&& token) {
  using R = std::invoke_result_t<std::decay_t<F>&>;
  return boost::asio::async_initiate<Token, typename detail::blocking_signature<R>::type>(
      detail::initiate_run_blocking{}, token, &pool, std::forward<F>(f));
}
//! The same on `blocking_pool()`.
template <class F, class Token>
auto async_run_blocking(F&& f, Token&& token) {
  return async_run_blocking(blocking_pool(), std::forward<F>(f), std::forward<Token>(token));
}

}  // namespace cuasync
