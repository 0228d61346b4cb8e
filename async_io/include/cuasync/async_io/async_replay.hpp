// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_wait_replay`: a replay of a region that someone else captured and replays (engine/replay_anchor.hpp), as
//! an Asio asynchronous operation: `co_await async_wait_replay(anchor, n)` resumes once the graph has been replayed
//! past the anchor's mark n times since the mark (`anchor.next()`: the replay now under way, or the next one).
//!
//! - Completion signature `void(std::error_code)`, tokens, handler executor and cancellation as `async_wait`
//!   (async_wait.hpp). Never early: the count moves only when the replay's work before the mark has completed.
//!   None lost: a wait for a generation already reached completes at once (posted), and one read of the counter
//!   completes every wait it covers.
//! - A device error of a replay (`CUDA_ERROR_ILLEGAL_ADDRESS` in one of its kernels) fails the waits of the
//!   generations not reached yet; `use_awaitable` throws a `cuda_error` that names this call and the caller's line
//!   (`anchor.label()` names the stream it was marked on).
//! - Nothing is enqueued: the replays are the caller's (`cuGraphLaunch`, `torch.cuda.CUDAGraph.replay()`).
//! @throws cuda_error from the call for an empty anchor

#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/engine/replay_anchor.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <source_location>
#include <utility>

namespace cuasync {

//! A generation and the caller's line (converted at the call, so that a failure names the line that awaited it).
struct replay_generation {
  std::uint64_t n;
  std::source_location where;
  replay_generation(std::uint64_t generation, std::source_location w = std::source_location::current()) noexcept
      : n(generation), where(w) {}
};

namespace detail {
//! A replay anchor's generation: its wait named after the caller's line.
struct replay_starter {
  wait_target t;
  std::source_location where;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    hints.where = where;
    s.start_wait(std::move(ex), std::move(t), std::move(h), hints);
  }
};
}  // namespace detail

//! Completes when `anchor` has reached generation `g`; the token defaults to `use_awaitable`.
template <class Token = const boost::asio::use_awaitable_t<>&>
auto async_wait_replay(const replay_anchor& anchor, replay_generation g, Token&& token = boost::asio::use_awaitable) {
  return detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                          detail::replay_starter{anchor.target(g.n, g.where), g.where}, std::forward<Token>(token),
                          "cuasync::async_wait_replay");
}

}  // namespace cuasync
