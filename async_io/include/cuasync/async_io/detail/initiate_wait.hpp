#pragma once
// Internal: the initiation shared by every async_* of async_io, and the completion-token adapters that make
// `use_awaitable` and `use_future` report failures as `cuda_error` and `redirect_error` take a std::error_code.
#include <cuasync/async_io/completion_service.hpp>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <exception>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

namespace cuasync::detail {

//! Throws `cuda_error(ec)` naming `api` (defined in async_io's sources).
[[noreturn]] void throw_wait_error(std::error_code ec, const char* api);
//! The same `cuda_error`, as an exception_ptr.
std::exception_ptr make_wait_error(std::error_code ec, const char* api);

//! The initiation: finds the I/O executor (the handler's associated executor, else `default_ex`) and its context's
//! completion service, erases the handler's type and lets `starter` start the wait.
struct initiate_wait {
  template <class Handler, class Starter>
  void operator()(Handler&& handler, const boost::asio::any_io_executor& default_ex, Starter&& starter) const {
    boost::asio::any_io_executor io_ex = boost::asio::get_associated_executor(handler, default_ex);
    auto& service = boost::asio::use_service<completion_service>(
        boost::asio::query(io_ex, boost::asio::execution::context));
    // io_ex is the handler's own executor (or the default it would get): the service needs no second work guard.
    constexpr wait_hints hints{
        .handler_on_io = true,
        .default_allocator =
            std::is_same_v<boost::asio::associated_allocator_t<std::decay_t<Handler>>, std::allocator<void>>};
    std::forward<Starter>(starter)(service, std::move(io_ex), wait_handler(std::forward<Handler>(handler)), hints);
  }
};

template <class T>
struct use_awaitable_traits : std::false_type {};
template <class E>
struct use_awaitable_traits<boost::asio::use_awaitable_t<E>> : std::true_type {
  using executor = E;
};
template <class T>
struct is_use_future : std::false_type {};
template <class A>
struct is_use_future<boost::asio::use_future_t<A>> : std::true_type {};
template <class T>
struct is_redirect_error : std::false_type {};
template <class T>
struct is_redirect_error<boost::asio::redirect_error_t<T>> : std::true_type {};

//! For `use_future`: the future's value is void and a failure is a `cuda_error` in the future.
struct throw_on_error {
  const char* api;
  void operator()(std::error_code ec) const {
    if (ec) throw_wait_error(ec, api);
  }
};

//! For `redirect_error(token, boost_ec)`: stores the std::error_code (convert back with `std::error_code(boost_ec)`)
//! and completes `Handler` with no arguments.
template <class Handler>
struct redirect_handler {
  Handler handler;
  boost::system::error_code* out;
  void operator()(std::error_code ec) {
    *out = boost::system::error_code(ec);
    std::move(handler)();
  }
};

struct initiate_redirected {
  template <class Handler, class Starter>
  void operator()(Handler&& handler, boost::system::error_code* out, const boost::asio::any_io_executor& default_ex,
                  Starter&& starter) const {
    initiate_wait{}(redirect_handler<std::decay_t<Handler>>{std::forward<Handler>(handler), out}, default_ex,
                    std::forward<Starter>(starter));
  }
};

//! For `use_awaitable`: completes the coroutine with the `cuda_error` as an exception, without a coroutine of its own.
template <class Handler>
struct exception_handler {
  Handler handler;
  const char* api;
  void operator()(std::error_code ec) {
    std::move(handler)(ec ? make_wait_error(ec, api) : std::exception_ptr());
  }
};

struct initiate_throwing {
  template <class Handler, class Starter>
  void operator()(Handler&& handler, const char* api, const boost::asio::any_io_executor& default_ex,
                  Starter&& starter) const {
    initiate_wait{}(exception_handler<std::decay_t<Handler>>{std::forward<Handler>(handler), api}, default_ex,
                    std::forward<Starter>(starter));
  }
};

//! Starts a wait with any completion token. `use_awaitable` gives an `awaitable<void>` that throws `cuda_error`;
//! `use_future` a `std::future<void>` holding a `cuda_error`; every other token completes with `void(std::error_code)`.
template <class Starter, class Token>
auto initiate(const boost::asio::any_io_executor& ex, Starter&& starter, Token&& token, const char* api) {
  using T = std::decay_t<Token>;
  if constexpr (use_awaitable_traits<T>::value) {
    return boost::asio::async_initiate<Token, void(std::exception_ptr)>(initiate_throwing{}, token, api, ex,
                                                                        std::forward<Starter>(starter));
  } else if constexpr (is_use_future<T>::value) {
    auto packaged = token(throw_on_error{api});
    return boost::asio::async_initiate<decltype(packaged), void(std::error_code)>(initiate_wait{}, packaged, ex,
                                                                                  std::forward<Starter>(starter));
  } else if constexpr (is_redirect_error<T>::value) {
    return boost::asio::async_initiate<decltype(token.token_), void()>(initiate_redirected{}, token.token_, &token.ec_,
                                                                       ex, std::forward<Starter>(starter));
  } else {
    return boost::asio::async_initiate<Token, void(std::error_code)>(initiate_wait{}, token, ex,
                                                                     std::forward<Starter>(starter));
  }
}

}  // namespace cuasync::detail

namespace boost::asio {
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
