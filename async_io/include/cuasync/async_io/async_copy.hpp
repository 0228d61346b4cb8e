// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_copy`: copy between host and device memory (or device and device) and await its completion:
//! `co_await async_copy(stream, dst, src)`, optionally with a keep-alive and any completion token as the last
//! arguments (`async_copy(s, dst, src, owner, use_future)`).
//!
//! Either side may be: host memory (`std::span<std::byte>` / `std::span<const std::byte>`, or a span of any trivially
//! copyable type), pinned or pageable;
//! device memory (`device_span`); a `runtime::tracked_buffer` (the stream first waits for its conflicting uses on
//! other streams); a `runtime::pinned_block` (not handed out again before the copy completes).
//!
//! - Sizes, pointers and directions are checked in the call: bad input throws `cuda_error` from `async_copy` itself.
//! - Pinned and device memory go straight to the driver. Pageable host memory goes through the staged copier
//!   (runtime/staged_copy.hpp) whatever its size: the driver's own pageable copy would wait on the calling thread for
//!   the work ahead of it on the stream. Its copy threads do the host copying; the completion engine sees each chunk's
//!   DMA complete. The staging of the runtime `rt` is used (the overloads that take one), else that of the stream's
//!   device (`device_runtime::for_device`) when the stream is on the device's primary context.
//! - The copy is enqueued when the operation is initiated (lazy tokens: when started, e.g. at `co_await`) and
//!   admitted (engine/admission.hpp): it never blocks the calling thread. A staged copy holds its stream until its
//!   last chunk is enqueued: later awaited operations on that stream wait for it, so stream order is call order.
//! - Host memory must stay valid until the operation completes — after a cancellation too (the copy goes on): pass
//!   its owner as `keep_alive`, held until the GPU (and, for pageable memory, the copy threads) are done with it.
//! - Completion signature `void(std::error_code)`; `use_awaitable` (the default) throws `cuda_error` on failure.
//!   Cancellation (total, partial, terminal): before admission nothing is copied; after, the copy goes on and the
//!   operation completes at once with `operation_canceled`.

#include <cuasync/async_io/detail/copy_work.hpp>
#include <cuasync/engine/work_key.hpp>
#include <cuasync/async_io/detail/initiate.hpp>

#include <cuasync/driver/launch.hpp>

#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <type_traits>
#include <utility>

namespace cuasync {

namespace detail {
//! Starts the copy with the keep-alive and token found among the trailing arguments.
struct copy_starter {
  stream_ref s;
  copy_work work;
  std::shared_ptr<void> keep_alive;
  void operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    if (work.staging) {
      svc.start_task(std::move(ex), s, task_ref::of(work), std::move(keep_alive), std::move(h), hints);
    } else {
      // Copies of one size between the same kinds of memory take alike.
      hints.work_key = copy_work_key((work.dst.host ? 1u : 0u) | (work.src.host ? 2u : 0u), work.bytes);
      svc.start_operation(std::move(ex), s, enqueue_ref::of(work), std::move(keep_alive), std::move(h), hints,
                          work.where);
    }
  }
};

template <class Token = boost::asio::use_awaitable_t<>>
auto start_copy(runtime::device_runtime* rt, const located_stream& s, const copy_end& dst, const copy_end& src,
                std::shared_ptr<void> keep_alive = nullptr, Token&& token = {}) {
  return initiate(boost::asio::any_io_executor(boost::asio::system_executor()),
                  copy_starter{s.stream, make_copy_work(rt, s.stream, dst, src, s.where), std::move(keep_alive)},
                  std::forward<Token>(token), "cuasync::async_copy");
}
template <class Token>
  requires(!std::is_convertible_v<Token, std::shared_ptr<void>>)
auto start_copy(runtime::device_runtime* rt, const located_stream& s, const copy_end& dst, const copy_end& src,
                Token&& token) {
  return start_copy(rt, s, dst, src, nullptr, std::forward<Token>(token));
}
}  // namespace detail

//! Copies `src` into the start of `dst` on `s`; completes when the copy (and all work before it on `s`) is done.
//! `rest`: optionally a keep-alive (`std::shared_ptr`), then optionally a completion token (default `use_awaitable`).
//! @throws cuda_error from the call for bad sizes, pointers or directions
template <class Dst, class Src, class... Rest>
auto async_copy(located_stream s, Dst&& dst, Src&& src, Rest&&... rest) {
  return detail::start_copy(nullptr, s, detail::endpoint(dst), detail::endpoint(src), std::forward<Rest>(rest)...);
}
//! The same, staging pageable memory through `rt` (whose context the stream must belong to).
template <class Dst, class Src, class... Rest>
auto async_copy(runtime::device_runtime& rt, located_stream s, Dst&& dst, Src&& src, Rest&&... rest) {
  return detail::start_copy(&rt, s, detail::endpoint(dst), detail::endpoint(src), std::forward<Rest>(rest)...);
}

}  // namespace cuasync
