// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/driver/stream.hpp>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

std::string stream_ref::describe() const {
  return "stream " + detail::handle_string(stream_) + ", device " + std::to_string(ctx_.device_ordinal());
}

stream_ref stream_ref::adopt(CUstream s, std::source_location where) {
  if (s == nullptr || s == CU_STREAM_LEGACY)
    detail::throw_invalid("cuasync::stream_ref::adopt",
                          "the legacy default stream cannot be adopted: it serialises with every blocking stream "
                          "(it serializes with every blocking stream); create a non-blocking stream or pass "
                          "CU_STREAM_PER_THREAD",
                          where);
  CUcontext ctx = nullptr;
  if (CUresult r = driver(where).cuStreamGetCtx(s, &ctx); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamGetCtx", "adopting stream " + detail::handle_string(s), where);
  stream_ref adopted(s, context_ref::adopt(ctx, where));
  // Known from here on, as a created stream's (the reference names this stream while it lives). CU_STREAM_PER_THREAD
  // names one stream per thread: never known.
  unsigned long long id = 0;
  if (s != CU_STREAM_PER_THREAD && driver().cuStreamGetId(s, &id) == CUDA_SUCCESS) adopted.id_ = id;
  return adopted;
}

void stream_ref::wait(event_ref e, std::source_location where) const {
  if (!stream_) detail::throw_invalid("cuasync::stream_ref::wait", "empty stream", where);
  if (CUresult r = driver().cuStreamWaitEvent(stream_, e.get(), 0); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamWaitEvent", describe() + " waiting on event " + detail::handle_string(e.get()), where);
  if (trace::active_hooks() & trace::hook::record) [[unlikely]]
    detail::trace_stream_wait(*this);
}

bool stream_ref::query(std::source_location where) const {
  if (!stream_) detail::throw_invalid("cuasync::stream_ref::query", "empty stream", where);
  CUresult r = driver().cuStreamQuery(stream_);
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  throw_cu(r, "cuStreamQuery", describe(), where);
}

void stream_ref::synchronize(std::source_location where) const {
  if (!stream_) detail::throw_invalid("cuasync::stream_ref::synchronize", "empty stream", where);
  trace::host_call hooked(trace::category::sync, "cuStreamSynchronize", 0, trace::flag::host_wait, &where);
  if (CUresult r = driver().cuStreamSynchronize(stream_); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamSynchronize", describe(), where);
  detail::throw_deferred(ctx_.get(), "cuasync::stream_ref::synchronize", where);
}

void stream_ref::launch_host_func(void (*fn)(void*), void* user_data, std::source_location where) const {
  if (!stream_) detail::throw_invalid("cuasync::stream_ref::launch_host_func", "empty stream", where);
  if (!fn) detail::throw_invalid("cuasync::stream_ref::launch_host_func", "null function on " + describe(), where);
  if (CUresult r = driver().cuLaunchHostFunc(stream_, fn, user_data); r != CUDA_SUCCESS)
    throw_cu(r, "cuLaunchHostFunc", describe(), where);
}

int stream_ref::priority(std::source_location where) const {
  int p = 0;
  if (CUresult r = driver().cuStreamGetPriority(stream_, &p); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamGetPriority", describe(), where);
  return p;
}

unsigned long long stream_ref::ask_id(std::source_location where) const {
  unsigned long long v = 0;
  if (CUresult r = driver().cuStreamGetId(stream_, &v); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamGetId", describe(), where);
  return v;
}

bool stream_ref::is_capturing(std::source_location where) const {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (CUresult r = driver().cuStreamIsCapturing(stream_, &status); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamIsCapturing", describe(), where);
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

thread_capture_mode::thread_capture_mode(CUstreamCaptureMode mode, std::source_location where) : previous_(mode) {
  if (CUresult r = driver().cuThreadExchangeStreamCaptureMode(&previous_); r != CUDA_SUCCESS)
    throw_cu(r, "cuThreadExchangeStreamCaptureMode", "setting this thread's stream capture mode", where);
}

thread_capture_mode::~thread_capture_mode() {
  // The driver is loaded (the constructor used it); a failure here leaves the thread in the mode it was set to.
  if (const auto* d = detail::driver_if_loaded()) (void)d->cuThreadExchangeStreamCaptureMode(&previous_);
}

unsigned stream_ref::flags(std::source_location where) const {
  unsigned f = 0;
  if (CUresult r = driver().cuStreamGetFlags(stream_, &f); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamGetFlags", describe(), where);
  return f;
}

stream stream::create(context_ref ctx, stream_options options, std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::stream::create", "empty context", where);
  scoped_context guard(ctx, where);
  CUstream s = nullptr;
  const unsigned flags = options.non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  if (CUresult r = driver().cuStreamCreateWithPriority(&s, flags, options.priority); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamCreateWithPriority",
             "device " + std::to_string(ctx.device_ordinal()) + ", priority " + std::to_string(options.priority),
             where);
  stream made(s, ctx);
  // Asked once here rather than at every use (an awaited operation keys its stream's state by it); unanswered, each
  // use asks.
  unsigned long long id = 0;
  if (driver().cuStreamGetId(s, &id) == CUDA_SUCCESS) made.id_ = id;
  return made;
}

stream& stream::operator=(stream&& o) noexcept {
  if (this != &o) {
    destroy_nothrow();
    stream_ = std::exchange(o.stream_, nullptr);
    ctx_ = o.ctx_;
    id_ = std::exchange(o.id_, 0);
  }
  return *this;
}

void stream::destroy_nothrow() noexcept {
  if (!stream_) return;
  if (trace::flight::enabled()) [[unlikely]]
    trace::flight::retire_ring(stream_);  // a later stream may get the handle: its ring starts afresh
  detail::release_nothrow_without_context(ctx_.get(), "cuStreamDestroy", stream_,
                                          [&](const auto& d) { return d.cuStreamDestroy(stream_); });
  stream_ = nullptr;
  id_ = 0;
}

}  // namespace cuasync
