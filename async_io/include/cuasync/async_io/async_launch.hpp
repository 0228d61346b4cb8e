#pragma once
//! @file `async_launch`: enqueue a kernel and await its completion: `co_await async_launch(stream, kernel, config,
//! args...)`. The launch and the recording of a pooled event happen in the call (so argument and configuration errors
//! throw there, before anything is awaited); the returned awaitable waits on the event.

#include <cuasync/async_io/async_wait.hpp>

#include <cuasync/driver/launch.hpp>

#include <boost/asio/use_future.hpp>

#include <future>

namespace cuasync {

//! Launches `kernel<<<config>>>(args...)` on `s` now and returns an awaitable that completes when the kernel (and
//! all work before it on `s`) has completed. Awaiting resumes on the coroutine's executor; the io thread is never
//! blocked. Cancellation: the coroutine's cancellation state (total, partial, terminal); the kernel keeps running.
//! @throws cuda_error from the call for a bad launch (see `launch`); from `co_await` with the device error
//! (e.g. CUDA_ERROR_ILLEGAL_ADDRESS) or `std::errc::operation_canceled`.
template <class... Args>
boost::asio::awaitable<void> async_launch(located_stream s, kernel_ref kernel, const launch_config& config,
                                          const Args&... args) {
  launch(s, kernel, config, args...);
  pooled_event e = cuda_completion_source::instance().record(s.stream, s.where);
  return async_wait(boost::asio::system_executor(), std::move(e), nullptr, boost::asio::use_awaitable);
}

//! The same for code that is not coroutine-based: launches now; the future becomes ready when the kernel has
//! completed (`get()` throws `cuda_error` with the device error). Completion is delivered on Asio's system executor.
//! For other completion tokens, `launch(...)` then `async_wait(stream, token)`.
template <class... Args>
std::future<void> launch_future(located_stream s, kernel_ref kernel, const launch_config& config,
                                const Args&... args) {
  launch(s, kernel, config, args...);
  pooled_event e = cuda_completion_source::instance().record(s.stream, s.where);
  return async_wait(boost::asio::system_executor(), std::move(e), nullptr, boost::asio::use_future);
}

}  // namespace cuasync
