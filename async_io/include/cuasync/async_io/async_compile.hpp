#pragma once
//! @file `async_compile`: an NVRTC compile (through jit's caching compiler) on a thread pool, completing on the
//! handler's executor — compiling takes 10–100 ms of CPU and must never block an Asio thread.
//!
//! Completion signature `void(std::exception_ptr, jit::compile_result)`: with `use_awaitable`, `co_await` returns the
//! result or rethrows `jit::compile_error` (with the NVRTC log), `nvrtc_not_found_error`, ...; `use_future` likewise.
//! Cancellation: not supported (the compile runs to completion; its result lands in the compiler's cache). A memory
//! cache hit still takes the trip through the pool.

#include <cuasync/async_io/async_run_blocking.hpp>

#include <cuasync/jit/compiler.hpp>
#include <cuasync/runtime/device_runtime.hpp>

namespace cuasync {

//! Compiles `p` for `t` with `o` on `pool` through `c` (which must outlive the operation).
template <class Token>
auto async_compile(jit::compiler& c, jit::program p, jit::target t, jit::compile_options o,
                   boost::asio::thread_pool& pool, Token&& token) {
  return async_run_blocking(
      pool, [&c, p = std::move(p), t = std::move(t), o = std::move(o)] { return c.compile(p, t, o); },
      std::forward<Token>(token));
}
//! Compiles for a device of `compute_capability` (major * 10 + minor) with `jit::default_compiler()` on
//! `blocking_pool()`.
template <class Token>
auto async_compile(jit::program p, int compute_capability, jit::compile_options o, Token&& token) {
  return async_run_blocking(
      blocking_pool(),
      [p = std::move(p), compute_capability, o = std::move(o)] {
        return jit::default_compiler().compile(p, compute_capability, o);
      },
      std::forward<Token>(token));
}

//! Kernel `name` of `p` for `rt`'s device, compiled (or found in the caches) and loaded into its context on
//! `blocking_pool()` (`device_runtime::kernel` blocks for 10 ms – seconds on a miss). Completion signature
//! `void(std::exception_ptr, kernel_ref)`; `co_await` returns the kernel or rethrows `jit::compile_error`, ...
//! `rt` must outlive the operation.
template <class Token>
auto async_kernel(runtime::device_runtime& rt, jit::program p, std::string name, jit::compile_options o,
                  Token&& token) {
  return async_run_blocking(
      blocking_pool(),
      [&rt, p = std::move(p), name = std::move(name), o = std::move(o)] { return rt.kernel(p, name, o); },
      std::forward<Token>(token));
}

}  // namespace cuasync
