// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Awaitable collectives: `co_await async_all_reduce(comm, send, recv, type, op, stream)`, or any completion
//! token as the last argument (`use_future`, callbacks, `as_tuple`, ...). Needs `cuasync::async_io` (Boost.Asio).
//!
//! - The collective is enqueued in the call, not when the operation starts: every rank must issue its collectives
//!   in the same order, and a lazy token's start (at `co_await`) would let that order depend on the scheduler.
//!   Bad arguments throw from the call.
//! - Completion signature `void(std::error_code)`: empty once the collective and everything before it on the stream
//!   are done; otherwise the fault of the communicator's fault domain (collective_completion.hpp), which was aborted
//!   so nothing hangs: an nccl_category code (NCCL's asynchronous error), a cu_category one (a device fault), or
//!   `std::errc::timed_out`. `use_awaitable` throws `cuda_error` whose `api()` names the collective, rank and
//!   device; `comm.fault_detail()` says what happened.
//! - Inside an open `group` the collectives are issued only when it ends, so the per-call forms refuse to run there:
//!   end the group, then `co_await async_wait_collective(comm, stream)` for each rank, or for all of this process's
//!   ranks at once, `co_await async_wait_collectives(parts)` (one wake-up instead of one per rank).
//! - Cancellation (total, partial, terminal) completes the wait with `operation_canceled`; the collective goes on.

#include <cuasync/collectives/collective_completion.hpp>
#include <cuasync/collectives/collective_ops.hpp>
#include <cuasync/collectives/detail/clique.hpp>

#include <cuasync/async_io/async_wait.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <initializer_list>

namespace cuasync::collectives {

namespace detail {
void refuse_inside_group(const char* api, std::source_location where);

template <class Token>
auto await_collective(const char* op, const communicator& c, stream_ref s, std::shared_ptr<void> keep_alive,
                      Token&& token, std::source_location where) {
  wait_target t = collective_completion_source::instance().record(c, s, std::move(keep_alive), where);
  return cuasync::detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                                   cuasync::detail::target_starter{std::move(t)}, std::forward<Token>(token),
                                   operation_label(op, *c.clique(), c.index()));
}

template <class Token>
auto await_parts(std::span<const rank_part> parts, Token&& token, std::source_location where) {
  wait_target t = collective_completion_source::instance().record(parts, nullptr, where);
  return cuasync::detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                                   cuasync::detail::target_starter{std::move(t)}, std::forward<Token>(token),
                                   parts_label(parts));
}

//! Refuses to run inside a group, issues the collective, then awaits it.
template <class Issue, class Token>
auto issue_and_await(const char* op, const communicator& c, const located_stream& s, Issue&& issue, Token&& token) {
  refuse_inside_group(op, s.where);
  issue();
  return await_collective(op, c, s.stream, nullptr, std::forward<Token>(token), s.where);
}
}  // namespace detail

//! Waits for everything enqueued on `s` so far, failing with `c`'s fault domain (after a `group` ended).
template <class Token = boost::asio::use_awaitable_t<>>
auto async_wait_collective(const communicator& c, located_stream s, Token&& token = {}) {
  return detail::await_collective("collective", c, s.stream, nullptr, std::forward<Token>(token), s.where);
}

//! Several ranks' parts (`rank_part{comm, stream}`: any contiguous range of them) with the caller's line.
struct located_parts {
  std::span<const rank_part> parts;
  std::source_location where;
  template <class Range>
  located_parts(const Range& r, std::source_location w = std::source_location::current())  // NOLINT: implicit
      : parts(r), where(w) {}
  //! `async_wait_collectives({{comm0, s0}, {comm1, s1}})`: the wait is recorded within the call, while the list lives.
  located_parts(std::initializer_list<rank_part> l,  // NOLINT: implicit
                std::source_location w = std::source_location::current())
      : parts(l.begin(), l.size()), where(w) {}
};

//! Waits for everything enqueued so far on every part's stream, failing with their fault domain: one process driving
//! several GPUs awaits a grouped collective in one completion. The parts must share one fault domain (one init_all).
template <class Token = boost::asio::use_awaitable_t<>>
auto async_wait_collectives(located_parts parts, Token&& token = {}) {
  return detail::await_parts(parts.parts, std::forward<Token>(token), parts.where);
}

template <class Token = boost::asio::use_awaitable_t<>>
auto async_all_reduce(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, reduce_op op,
                      located_stream s, Token&& token = {}) {
  return detail::issue_and_await("ncclAllReduce", c, s, [&] { all_reduce(c, send, recv, t, op, s.stream, s.where); },
                                 std::forward<Token>(token));
}

template <class Token = boost::asio::use_awaitable_t<>>
auto async_broadcast(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, int root,
                     located_stream s, Token&& token = {}) {
  return detail::issue_and_await("ncclBroadcast", c, s, [&] { broadcast(c, send, recv, t, root, s.stream, s.where); },
                                 std::forward<Token>(token));
}

template <class Token = boost::asio::use_awaitable_t<>>
auto async_reduce_scatter(const communicator& c, collective_buffer send, collective_buffer recv, data_type t,
                          reduce_op op, located_stream s, Token&& token = {}) {
  return detail::issue_and_await(
      "ncclReduceScatter", c, s, [&] { reduce_scatter(c, send, recv, t, op, s.stream, s.where); },
      std::forward<Token>(token));
}

template <class Token = boost::asio::use_awaitable_t<>>
auto async_all_gather(const communicator& c, collective_buffer send, collective_buffer recv, data_type t,
                      located_stream s, Token&& token = {}) {
  return detail::issue_and_await("ncclAllGather", c, s, [&] { all_gather(c, send, recv, t, s.stream, s.where); },
                                 std::forward<Token>(token));
}

}  // namespace cuasync::collectives
