// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! How completion tokens treat the `void(std::error_code)` signature of every async_io operation.
//!
//! Asio raises a failed `boost::system::error_code` as an exception for `use_awaitable` and `use_future`, and
//! `redirect_error` stores it; for `std::error_code` it has no such rules (the code would be returned as a value,
//! easy to ignore). These specialisations give `std::error_code` the same treatment, through Asio's public
//! customisation point (`async_result`), so a wrapped token (`bind_executor(ex, use_awaitable)`) behaves exactly like
//! a plain one:
//! - `use_awaitable`: `co_await` returns nothing, or throws `cuda_error` (a `std::system_error`) with the code;
//! - `use_future`: a `std::future<void>` whose `get()` throws that `cuda_error`;
//! - `redirect_error(token, ec)`: stores the code in `ec` (a `boost::system::error_code`; `std::error_code(ec)`
//!   gives the CUresult code back) and completes `token` with no arguments;
//! - every other token (callbacks, `as_tuple`, `deferred`, `detached`) receives the `std::error_code` itself.
//! They apply to any operation with that exact signature, cuasync's or not.

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <exception>
#include <system_error>
#include <type_traits>
#include <utility>

namespace cuasync::detail {

//! A `cuda_error` for a failed operation (`api` names it), as an exception_ptr (defined in async_io's sources).
std::exception_ptr make_wait_error(std::error_code ec, const char* api);

//! The operation's name, when its initiation says it (`api` member), for the exception's message.
template <class Initiation>
const char* api_of(const Initiation& init) noexcept {
  if constexpr (requires { init.api; })
    return init.api;
  else
    return "awaited operation";
}

//! Completes `handler` with an exception_ptr instead of the code.
template <class Handler>
struct exception_handler {
  Handler handler;
  const char* api;
  void operator()(std::error_code ec) {
    std::move(handler)(ec ? make_wait_error(ec, api) : std::exception_ptr());
  }
};

//! Stores the code in `*out` and completes `handler` with no arguments.
template <class Handler>
struct redirect_handler {
  Handler handler;
  boost::system::error_code* out;
  void operator()(std::error_code ec) {
    *out = boost::system::error_code(ec);
    std::move(handler)();
  }
};

template <class Initiation>
struct to_exception_initiation {
  Initiation init;
  template <class Handler, class... Args>
  void operator()(Handler&& h, Args&&... args) && {
    const char* api = api_of(init);
    std::move(init)(exception_handler<std::decay_t<Handler>>{std::forward<Handler>(h), api},
                    std::forward<Args>(args)...);
  }
};

template <class Initiation>
struct redirect_initiation {
  Initiation init;
  boost::system::error_code* out;
  template <class Handler, class... Args>
  void operator()(Handler&& h, Args&&... args) && {
    std::move(init)(redirect_handler<std::decay_t<Handler>>{std::forward<Handler>(h), out},
                    std::forward<Args>(args)...);
  }
};

}  // namespace cuasync::detail

namespace boost::asio {

template <class Executor>
class async_result<use_awaitable_t<Executor>, void(std::error_code)> {
 public:
  using return_type = awaitable<void, Executor>;
  template <class Initiation, class... Args>
  static return_type initiate(Initiation&& init, use_awaitable_t<Executor> token, Args&&... args) {
    return async_initiate<use_awaitable_t<Executor>, void(std::exception_ptr)>(
        cuasync::detail::to_exception_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(init)}, token,
        std::forward<Args>(args)...);
  }
};

template <class Allocator>
class async_result<use_future_t<Allocator>, void(std::error_code)> {
 public:
  template <class Initiation, class... Args>
  static auto initiate(Initiation&& init, use_future_t<Allocator> token, Args&&... args) {
    return async_initiate<use_future_t<Allocator>, void(std::exception_ptr)>(
        cuasync::detail::to_exception_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(init)}, token,
        std::forward<Args>(args)...);
  }
};

template <class Token>
class async_result<redirect_error_t<Token>, void(std::error_code)> {
 public:
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& init, RawToken&& token, Args&&... args) {
    // redirect_error_t's documented data members: the wrapped token and the error_code to store into.
    return async_initiate<std::conditional_t<std::is_const_v<std::remove_reference_t<RawToken>>, const Token, Token>,
                          void()>(
        cuasync::detail::redirect_initiation<std::decay_t<Initiation>>{std::forward<Initiation>(init), &token.ec_},
        token.token_, std::forward<Args>(args)...);
  }
};

//! The adapted handlers keep the inner handler's executor, allocator and cancellation slot.
template <template <class, class> class Associator, class Handler, class Default>
struct associator<Associator, cuasync::detail::exception_handler<Handler>, Default> : Associator<Handler, Default> {
  static typename Associator<Handler, Default>::type get(const cuasync::detail::exception_handler<Handler>& h) noexcept {
    return Associator<Handler, Default>::get(h.handler);
  }
  static auto get(const cuasync::detail::exception_handler<Handler>& h, const Default& d) noexcept
      -> decltype(Associator<Handler, Default>::get(h.handler, d)) {
    return Associator<Handler, Default>::get(h.handler, d);
  }
};
template <template <class, class> class Associator, class Handler, class Default>
struct associator<Associator, cuasync::detail::redirect_handler<Handler>, Default> : Associator<Handler, Default> {
  static typename Associator<Handler, Default>::type get(const cuasync::detail::redirect_handler<Handler>& h) noexcept {
    return Associator<Handler, Default>::get(h.handler);
  }
  static auto get(const cuasync::detail::redirect_handler<Handler>& h, const Default& d) noexcept
      -> decltype(Associator<Handler, Default>::get(h.handler, d)) {
    return Associator<Handler, Default>::get(h.handler, d);
  }
};

}  // namespace boost::asio
