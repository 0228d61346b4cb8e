#pragma once
//! @file `async_copy`: enqueue a copy (host↔device, device↔device) and await its completion. The copy is enqueued
//! in the call (size and range errors throw there); the completion token then waits on a pooled event recorded after
//! it. Host memory must stay valid until the copy completes — pass `keep_alive` to tie its owner to the operation, so
//! that a cancelled wait (the copy goes on) does not free memory the DMA engine still uses.
//!
//! Completion signature `void(std::error_code)`; `use_awaitable` (the default) gives `awaitable<void>` throwing
//! `cuda_error`, `use_future` a `std::future<void>`. Cancellation: total, partial, terminal. Never blocks.

#include <cuasync/async_io/async_wait.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/launch.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <span>

namespace cuasync {

namespace detail {
template <class Token>
auto await_copy(const located_stream& s, std::shared_ptr<void> keep_alive, Token&& token) {
  pooled_event e = cuda_completion_source::instance().record(s.stream, s.where);
  return async_wait(boost::asio::system_executor(), std::move(e), std::move(keep_alive), std::forward<Token>(token));
}
}  // namespace detail

//! Host to device. @throws cuda_error when the copy cannot be enqueued
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, device_span dst, std::span<const std::byte> src, std::shared_ptr<void> keep_alive,
                Token&& token = {}) {
  copy_async(s.stream, dst, src, s.where);
  return detail::await_copy(s, std::move(keep_alive), std::forward<Token>(token));
}
//! Device to host. @throws cuda_error when the copy cannot be enqueued
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, std::span<std::byte> dst, device_span src, std::shared_ptr<void> keep_alive,
                Token&& token = {}) {
  copy_async(s.stream, dst, src, s.where);
  return detail::await_copy(s, std::move(keep_alive), std::forward<Token>(token));
}
//! Device to device. @throws cuda_error when the copy cannot be enqueued
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, device_span dst, device_span src, std::shared_ptr<void> keep_alive,
                Token&& token = {}) {
  copy_async(s.stream, dst, src, s.where);
  return detail::await_copy(s, std::move(keep_alive), std::forward<Token>(token));
}

//! The same without a keep-alive (the caller keeps the memory alive until completion, even after a cancellation).
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, device_span dst, std::span<const std::byte> src, Token&& token = {}) {
  return async_copy(std::move(s), dst, src, nullptr, std::forward<Token>(token));
}
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, std::span<std::byte> dst, device_span src, Token&& token = {}) {
  return async_copy(std::move(s), dst, src, nullptr, std::forward<Token>(token));
}
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy(located_stream s, device_span dst, device_span src, Token&& token = {}) {
  return async_copy(std::move(s), dst, src, nullptr, std::forward<Token>(token));
}

}  // namespace cuasync
