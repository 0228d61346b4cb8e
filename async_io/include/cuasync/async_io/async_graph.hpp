// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_launch_graph`: one replay of an instantiated graph on a stream, as an Asio asynchronous operation that
//! completes when that replay (and all work before it on the stream) has completed — so a coroutine `co_await`s each
//! replay of a captured step, once per replay, with the replay's device error (`CUDA_ERROR_ILLEGAL_ADDRESS` in one of
//! its kernels) reaching that replay's awaiter.
//!
//! - Completion signature `void(std::error_code)`, tokens, handler executor and cancellation as `async_launch`
//!   (async_launch.hpp): admitted like any operation on the stream, the replay is enqueued once admitted, then an
//!   event recorded after it (on the stream, outside any capture) completes the wait. Cancellation before admission
//!   enqueues nothing; after, the replay runs on.
//! - Replays of one graph are one kind of work to the engine's predictor: from the fourth one on, the wait sleeps
//!   until just before the replay's expected end instead of polling through it.
//! - `exec` must stay alive (not destroyed or moved from) until the operation completes; updating its nodes while a
//!   replay waits for admission changes what that replay runs (as for a later `exec.launch`).
//! @throws cuda_error from the call for an empty `exec` or a stream of another context than the graph's

#include <cuasync/async_io/detail/initiate.hpp>
#include <cuasync/engine/work_key.hpp>
#include <cuasync/runtime/graph.hpp>

#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <utility>

namespace cuasync {

namespace detail {
//! The enqueue of one replay.
struct graph_replay_work {
  const runtime::graph_exec* exec;
  std::source_location where;
  void operator()(stream_ref s) const { exec->launch(s, where); }
  std::uint64_t work_key() const noexcept { return graph_work_key(exec->get()); }
};
void check_graph_replay(const runtime::graph_exec& exec, stream_ref s, std::source_location where);
}  // namespace detail

//! Replays `exec` on `s` once admitted and completes when that replay has completed. The token defaults to
//! `use_awaitable` (throws `cuda_error` with the replay's error).
template <class Token = const boost::asio::use_awaitable_t<>&>
auto async_launch_graph(const runtime::graph_exec& exec, located_stream s,
                        Token&& token = boost::asio::use_awaitable) {
  detail::check_graph_replay(exec, s.stream, s.where);
  return detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                          detail::operation_starter<detail::graph_replay_work>{
                              s.stream, detail::graph_replay_work{&exec, s.where}, nullptr, s.where},
                          std::forward<Token>(token), "cuasync::async_launch_graph");
}

}  // namespace cuasync
