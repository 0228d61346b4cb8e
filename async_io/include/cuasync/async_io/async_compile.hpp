// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_compile`: an NVRTC compile through jit's caching compiler, completing on the handler's executor —
//! compiling takes 10–100 ms of CPU and must never block an Asio thread.
//!
//! The compiler's front (the memory cache, joining a compile of the same key in flight, the disk cache) runs on a
//! thread pool. A miss compiles there too, unless the compiler has a compile farm (`jit::compiler::use_farm`): then
//! it is queued in the farm and the pool thread is free at once, so hundreds of compiles in flight hold no thread.
//!
//! Completion signature `void(std::exception_ptr, jit::compile_result)`: with `use_awaitable`, `co_await` returns the
//! result or rethrows `jit::compile_error` (with the NVRTC log), `nvrtc_not_found_error`, `farm_worker_error`, ...;
//! `use_future` likewise. The handler is dispatched to its executor from a pool thread (never run inside the
//! initiating call; a handler without an executor of its own, like `use_future`'s, runs on that pool thread).
//! Cancellation: not supported (the compile runs to completion; its result lands in the compiler's cache). A memory
//! cache hit still takes the trip through the pool.

#include <cuasync/async_io/async_run_blocking.hpp>

#include <cuasync/jit/compile_farm.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <memory>
#include <type_traits>

namespace cuasync {

namespace detail {
// Runs `start(done)` on `pool`; `done(result, error)` (from the pool or from a farm's delivery thread) dispatches the
// handler to its associated executor from a pool thread. Never from the farm's thread, which would then run a handler
// without an executor of its own; and never a post to the system executor, whose threads a process's exit destroys
// while the (never destroyed) pool's threads may still be posting to them.
struct initiate_compile {
  template <class Handler, class Start>
  void operator()(Handler&& handler, boost::asio::thread_pool* pool, Start&& start) const {
    auto work = boost::asio::prefer(boost::asio::get_associated_executor(handler),
                                    boost::asio::execution::outstanding_work.tracked);
    // std::function copies what it holds: the handler (move-only) is shared by the copies, and called once.
    auto h = std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
    jit::compiler::callback done = [h, work, pool](jit::compile_result r, std::exception_ptr e) {
      auto complete = [h, work, e, r = std::move(r)]() mutable {
        boost::asio::dispatch(work, [h, e, r = std::move(r)]() mutable { std::move(*h)(e, std::move(r)); });
      };
      if (pool->get_executor().running_in_this_thread())
        complete();  // a memory-cache hit answers on the pool thread that started it
      else
        boost::asio::post(*pool, std::move(complete));
    };
    boost::asio::post(*pool, [start = std::forward<Start>(start), done = std::move(done)]() mutable {
      start(std::move(done));
    });
  }
};

template <class Token, class Start>
auto async_compile_with(boost::asio::thread_pool& pool, Start&& start, Token&& token) {
  return boost::asio::async_initiate<Token, void(std::exception_ptr, jit::compile_result)>(
      initiate_compile{}, token, &pool, std::forward<Start>(start));
}
}  // namespace detail

//! Compiles `p` for `t` with `o` through `c` (which, and whose farm, must outlive the operation), its front on `pool`.
template <class Token>
auto async_compile(jit::compiler& c, jit::program p, jit::target t, jit::compile_options o,
                   boost::asio::thread_pool& pool, Token&& token) {
  return detail::async_compile_with(
      pool,
      [&c, p = std::move(p), t = std::move(t), o = std::move(o)](jit::compiler::callback done) {
        c.compile_async(p, t, o, std::move(done));
      },
      std::forward<Token>(token));
}
//! The same with the front on `blocking_pool()`.
template <class Token>
auto async_compile(jit::compiler& c, jit::program p, jit::target t, jit::compile_options o, Token&& token) {
  return async_compile(c, std::move(p), std::move(t), std::move(o), blocking_pool(), std::forward<Token>(token));
}
//! Compiles for a device of `compute_capability` (major * 10 + minor) with `jit::default_compiler()` (and its farm,
//! when one was given to it), its front on `blocking_pool()`.
template <class Token>
auto async_compile(jit::program p, int compute_capability, jit::compile_options o, Token&& token) {
  return detail::async_compile_with(
      blocking_pool(),
      [p = std::move(p), compute_capability, o = std::move(o)](jit::compiler::callback done) {
        jit::default_compiler().compile_async(p, compute_capability, o, jit::output_request::automatic,
                                              std::move(done));
      },
      std::forward<Token>(token));
}
//! Compiles `p` for `t` with `o` in `farm` uncached (`jit::compile_farm::submit`; the result's outcome is `miss`).
//! `farm` must outlive the operation.
template <class Token>
auto async_compile(jit::compile_farm& farm, jit::program p, jit::target t, jit::compile_options o, Token&& token) {
  return detail::async_compile_with(
      blocking_pool(),  // submit loads NVRTC the first time, and hashes the source
      [&farm, p = std::move(p), t = std::move(t), o = std::move(o)](jit::compiler::callback done) {
        try {
          farm.submit(p, t, o, done);
        } catch (...) {
          done(jit::compile_result{}, std::current_exception());
        }
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
