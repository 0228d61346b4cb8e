// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What a failed operation throws (use_awaitable, use_future) and failure_detail() describes, and the stream wait's
// start.
#include "failure_scope.hpp"

#include <cuasync/async_io/detail/initiate.hpp>
#include <cuasync/async_io/error_tokens.hpp>
#include <cuasync/async_io/failure_detail.hpp>

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

namespace cuasync::detail {

namespace {
thread_local const failure_info* delivering = nullptr;

std::string describe(std::error_code ec, const failure_info* info) {
  if (ec == std::errc::operation_canceled) return "the operation was cancelled (GPU work already enqueued goes on)";
  std::string what = "the GPU work awaited";
  if (info && info->stream) what += " on " + info->stream.describe();
  what += " failed";
  if (ec.category() == cu_category() && cuda_completion_source::is_sticky(static_cast<CUresult>(ec.value())))
    what += ": a kernel or copy before it faulted";  // the sticky advice is the cuda_error's own
  return what;
}
}  // namespace

failure_scope::failure_scope(std::error_code ec, std::exception_ptr described, stream_ref s,
                             std::source_location where) noexcept
    : info_{ec, std::move(described), s, where}, outer_(delivering) {
  delivering = &info_;
}
failure_scope::~failure_scope() { delivering = outer_; }

const failure_info* current_failure() noexcept { return delivering; }

std::exception_ptr make_wait_error(std::error_code ec, const char* api) {
  const failure_info* info = delivering && delivering->ec == ec ? delivering : nullptr;
  if (info && info->described) return info->described;  // the failed call's own error: names the call
  try {
    if (info && info->where.line() != 0) return std::make_exception_ptr(cuda_error(ec, api, describe(ec, info), info->where));
    return std::make_exception_ptr(cuda_error(ec, api, describe(ec, info)));
  } catch (...) {
    return std::current_exception();  // out of memory for the message
  }
}

void stream_starter::operator()(completion_service& svc, boost::asio::any_io_executor ex, wait_handler h,
                                wait_hints hints) && {
  pooled_event e;
  try {
    e = cuda_completion_source::instance().record(s, where);
  } catch (const cuda_error& err) {
    // The record's own error (it names cuEventRecord, the stream and the caller's line), not a generic "the work
    // awaited failed": nothing was awaited yet.
    svc.fail_wait(std::move(ex), err.code(), std::move(h), std::current_exception(), s, where);
    return;
  }
  hints.where = where;
  svc.start_wait(std::move(ex), std::move(e).into_target(std::move(keep_alive)), std::move(h), hints);
}

}  // namespace cuasync::detail

namespace cuasync {
std::exception_ptr failure_detail() noexcept {
  const detail::failure_info* info = detail::current_failure();
  if (!info || !info->ec) return nullptr;
  return detail::make_wait_error(info->ec, "cuasync");
}
}  // namespace cuasync
