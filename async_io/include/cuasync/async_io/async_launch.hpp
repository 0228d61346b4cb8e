// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_launch`: launch a kernel and await its completion: `co_await async_launch(stream, kernel, config,
//! args...)`, or with any completion token as the last argument (`async_launch(s, k, cfg, x, n, use_future)`).
//!
//! - Arguments are checked against the kernel's parameters, and the configuration against the device's limits, in
//!   the call: bad input throws `cuda_error` from `async_launch` itself, before anything is enqueued.
//! - Tracked buffers: `runtime::reads(b)`, `writes(b)`, `read_writes(b)` pass the buffer's address and make the
//!   stream wait (on the device) for the buffer's conflicting uses on other streams (runtime/tracked_buffer.hpp).
//! - The launch is enqueued when the operation is initiated (for lazy tokens such as `use_awaitable` and `deferred`:
//!   when it is started, e.g. at `co_await`) and admitted (engine/admission.hpp): with no room on the stream or its
//!   context it waits, asynchronously, and is enqueued once earlier operations complete. The calling thread never
//!   waits for the GPU. Arguments are copied; tracked buffers must outlive the operation.
//! - Completion signature `void(std::error_code)`: empty when the kernel and all work before it on the stream have
//!   completed; the launch's error (it could not be enqueued) or the device's (e.g. CUDA_ERROR_ILLEGAL_ADDRESS);
//!   `operation_canceled` when cancelled. `use_awaitable` (the default) throws `cuda_error` instead (error_tokens.hpp).
//! - Cancellation (total, partial, terminal): before admission the kernel is never launched; after, it runs on and
//!   the operation completes at once.

#include <cuasync/async_io/detail/initiate.hpp>

#include <cuasync/engine/work_key.hpp>

#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/launch.hpp>

#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/use_future.hpp>

#include <future>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuasync {

namespace detail {
//! True when the last of `Args` is a completion token for `void(std::error_code)` (kernel arguments never are).
template <class... Args>
struct ends_with_token : std::false_type {};
template <class... Args>
  requires(sizeof...(Args) > 0)
struct ends_with_token<Args...>
    : std::bool_constant<boost::asio::completion_token_for<
          std::decay_t<std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>>, void(std::error_code)>> {};

//! The enqueue of one launch: tracked uses first (cross-stream waits), then the checked launch.
template <class... A>
struct launch_work {
  kernel_ref kernel;
  launch_config config;
  std::tuple<A...> args;
  std::source_location where;
  void operator()(stream_ref s) const {
    std::apply(
        [&](const A&... a) {
          (runtime::detail::declare_use(a, s), ...);
          cuasync::launch(located_stream(s, where), kernel, config, runtime::detail::kernel_argument(a)...);
        },
        args);
  }
  //! Launches of one function and shape are predicted to take as long as the last ones.
  std::uint64_t work_key() const noexcept { return launch_work_key(kernel.get(), config); }
};

template <class Token, class... A>
auto start_launch(const located_stream& s, kernel_ref kernel, const launch_config& config, Token&& token,
                  A&&... args) {
  using work = launch_work<std::decay_t<A>...>;
  check_launch<std::decay_t<decltype(runtime::detail::kernel_argument(args))>...>(
      launched_kernel(kernel, "cuasync::async_launch", s.stream, s.where), config, s.stream, s.where);
  return initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                  operation_starter<work>{s.stream, work{kernel, config, {std::forward<A>(args)...}, s.where},
                                          nullptr, s.where},
                  std::forward<Token>(token), "cuasync::async_launch");
}

template <class Tuple, std::size_t... I>
auto launch_with_token(const located_stream& s, kernel_ref kernel, const launch_config& config, Tuple&& all,
                       std::index_sequence<I...>) {
  constexpr std::size_t last = std::tuple_size_v<std::decay_t<Tuple>> - 1;
  return start_launch(s, kernel, config, std::get<last>(std::forward<Tuple>(all)),
                      std::get<I>(std::forward<Tuple>(all))...);
}
}  // namespace detail

//! Launches `kernel<<<config>>>(args...)` on `s` once admitted and completes when it (and all work before it on `s`)
//! has completed. The last argument may be a completion token (default `use_awaitable`). The handler runs on its
//! associated executor (the system executor by default; a coroutine resumes on its own).
//! @throws cuda_error from the call for bad arguments or configuration (see `launch`)
template <class... ArgsAndToken>
auto async_launch(located_stream s, kernel_ref kernel, const launch_config& config, ArgsAndToken&&... rest) {
  if constexpr (detail::ends_with_token<ArgsAndToken...>::value)
    return detail::launch_with_token(s, kernel, config, std::forward_as_tuple(std::forward<ArgsAndToken>(rest)...),
                                     std::make_index_sequence<sizeof...(ArgsAndToken) - 1>());
  else
    return detail::start_launch(s, kernel, config, boost::asio::use_awaitable, std::forward<ArgsAndToken>(rest)...);
}

//! The same for code that is not coroutine-based: the future becomes ready when the kernel has completed (`get()`
//! throws `cuda_error` with the error). Equivalent to `async_launch(s, kernel, config, args..., use_future)`.
template <class... Args>
std::future<void> launch_future(located_stream s, kernel_ref kernel, const launch_config& config, Args&&... args) {
  return async_launch(s, kernel, config, std::forward<Args>(args)..., boost::asio::use_future);
}

}  // namespace cuasync
