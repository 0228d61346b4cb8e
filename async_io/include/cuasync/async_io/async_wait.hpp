// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_wait`: completion of GPU work (an event, or everything enqueued on a stream so far) as an Asio
//! asynchronous operation, so a coroutine `co_await`s a kernel without blocking a thread.
//!
//! - Completion signature `void(std::error_code)`: empty when the work completed; the `CUresult` (`cu_category()`)
//!   when the GPU reported an error (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`; a sticky context error fails every pending
//!   wait on that context); `std::errc::operation_canceled` (ECANCELED, Asio's `operation_aborted`) when cancelled.
//! - Every completion token works, plain or wrapped (error_tokens.hpp): `use_awaitable` throws `cuda_error` on
//!   failure, `use_future`'s `get()` too; `redirect_error(token, ec)` stores the code; `as_tuple`, `deferred`,
//!   `detached` and callbacks receive the `std::error_code`.
//! - The handler runs on its associated executor, never inside this call and never on the poller thread. The I/O
//!   executor is the handler's associated executor, or `ex` for the overloads that take one (default: the system
//!   executor); its execution context owns the `completion_service` used. Outstanding work is tracked on both
//!   executors until completion, so `run()` does not return while the GPU work is awaited.
//! - Cancellation: the handler's cancellation slot; total, partial and terminal are supported. The GPU work is not
//!   cancelled: the event and `keep_alive` stay alive until the GPU has finished.
//! - Never blocks. Initiation (for lazy tokens such as `deferred` and `use_awaitable`: when the operation is
//!   started) records a pooled event on the stream for the stream overloads.
//! @throws cuda_error only when the driver cannot be loaded; a failed `cuEventRecord` completes the wait with its
//!   error instead.

#include <cuasync/async_io/detail/initiate.hpp>

#include <boost/asio/system_executor.hpp>

namespace cuasync {

template <class E>
concept asio_executor = boost::asio::execution::executor<E> || boost::asio::is_executor<E>::value;

//! Waits for `e`'s recorded work. `e` must stay valid (not destroyed, not re-recorded) until the wait completes. The
//! wait is named after the caller's line (`located_event`) in the timeline and in its errors.
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, located_event e, std::shared_ptr<void> keep_alive, Token&& token) {
  return detail::initiate(boost::asio::any_io_executor(ex),
                          detail::event_starter{e.event, std::move(keep_alive), e.where},
                          std::forward<Token>(token), "cuasync::async_wait(event)");
}
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, located_event e, Token&& token) {
  return async_wait(ex, e, nullptr, std::forward<Token>(token));
}
template <class Token>
auto async_wait(located_event e, Token&& token) {
  return async_wait(boost::asio::system_executor(), e, nullptr, std::forward<Token>(token));
}

//! Waits for everything enqueued on `s` before the wait starts (a pooled event is recorded on `s`). Errors name the
//! caller's line (`located_stream`).
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, located_stream s, std::shared_ptr<void> keep_alive, Token&& token) {
  return detail::initiate(boost::asio::any_io_executor(ex),
                          detail::stream_starter{s.stream, std::move(keep_alive), s.where},
                          std::forward<Token>(token), "cuasync::async_wait(stream)");
}
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, located_stream s, Token&& token) {
  return async_wait(ex, std::move(s), nullptr, std::forward<Token>(token));
}
template <class Token>
auto async_wait(located_stream s, Token&& token) {
  return async_wait(boost::asio::system_executor(), std::move(s), nullptr, std::forward<Token>(token));
}

//! Waits for a pooled event already recorded (`event_pool::record`, `cuda_completion_source::record`), and returns it
//! to its pool once done.
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, pooled_event e, std::shared_ptr<void> keep_alive, Token&& token) {
  return detail::initiate(boost::asio::any_io_executor(ex), detail::pooled_starter{std::move(e), std::move(keep_alive)},
                          std::forward<Token>(token), "cuasync::async_wait");
}
template <class Token>
auto async_wait(pooled_event e, Token&& token) {
  return async_wait(boost::asio::system_executor(), std::move(e), nullptr, std::forward<Token>(token));
}

//! Waits for any completion source's token (`host_completion_source` for host-side work and tests).
template <asio_executor Executor, class Token>
auto async_wait(const Executor& ex, wait_target target, Token&& token) {
  return detail::initiate(boost::asio::any_io_executor(ex), detail::target_starter{std::move(target)},
                          std::forward<Token>(token), "cuasync::async_wait");
}
template <class Token>
auto async_wait(wait_target target, Token&& token) {
  return async_wait(boost::asio::system_executor(), std::move(target), std::forward<Token>(token));
}

}  // namespace cuasync
