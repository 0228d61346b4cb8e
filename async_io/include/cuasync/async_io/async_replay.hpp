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
//!   generations not reached yet; `use_awaitable` throws a `cuda_error` that names this call (`anchor.label()` names
//!   the stream it was marked on).
//! - Nothing is enqueued: the replays are the caller's (`cuGraphLaunch`, `torch.cuda.CUDAGraph.replay()`).
//! @throws cuda_error from the call for an empty anchor

#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/engine/replay_anchor.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <utility>

namespace cuasync {

//! Completes when `anchor` has reached generation `n`; the token defaults to `use_awaitable`.
template <class Token = const boost::asio::use_awaitable_t<>&>
auto async_wait_replay(const replay_anchor& anchor, std::uint64_t n, Token&& token = boost::asio::use_awaitable) {
  return detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                          detail::target_starter{anchor.target(n)}, std::forward<Token>(token),
                          "cuasync::async_wait_replay");
}

}  // namespace cuasync
