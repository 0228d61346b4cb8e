// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_copy_peer`: an awaitable copy between two devices' tracked buffers (`cuMemcpyPeerAsync`, peer access
//! enabled on demand; runtime/peer.hpp): `co_await async_copy_peer(stream, dst, src)`, or any completion token last.
//!
//! - `stream` may be on either buffer's device (the copy engines of that device do the work). It first waits, on
//!   the device, for the buffers' conflicting uses on any stream of either device.
//! - Enqueued once the operation has started and is admitted, as `async_launch`; sizes are checked in the call.
//! - Completion signature `void(std::error_code)`, as every async_io operation; the buffers must outlive it.

#include <cuasync/async_io/detail/initiate.hpp>

#include <cuasync/runtime/peer.hpp>

#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace cuasync {

namespace detail {
//! The enqueue of one peer copy.
struct peer_copy_work {
  runtime::tracked_buffer* dst;
  runtime::tracked_buffer* src;
  std::source_location where;
  void operator()(stream_ref s) const { runtime::copy_peer_async(s, *dst, *src, where); }
};
//! Checks sizes and the stream's device before anything is enqueued. @throws cuda_error
void check_peer_copy(stream_ref s, const runtime::tracked_buffer& dst, const runtime::tracked_buffer& src,
                     std::source_location where);
}  // namespace detail

//! Copies all of `src` into the start of `dst` on `s` once admitted; completes when the copy (and the work before it
//! on `s`) is done. @throws cuda_error from the call for sizes, empty buffers or a stream on a third device
template <class Token = boost::asio::use_awaitable_t<>>
auto async_copy_peer(located_stream s, runtime::tracked_buffer& dst, runtime::tracked_buffer& src, Token&& token = {}) {
  detail::check_peer_copy(s.stream, dst, src, s.where);
  return detail::initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                          detail::operation_starter<detail::peer_copy_work>{
                              s.stream, detail::peer_copy_work{&dst, &src, s.where}, nullptr, s.where},
                          std::forward<Token>(token), "cuasync::async_copy_peer");
}

}  // namespace cuasync
