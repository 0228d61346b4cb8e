// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/event.hpp>
#include <cuasync/trace/hooks.hpp>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

std::string event_ref::describe() const {
  return "event " + detail::handle_string(event_) + ", device " + std::to_string(ctx_.device_ordinal());
}

void event_ref::synchronize(std::source_location where) const {
  trace::host_call hooked(trace::category::sync, "cuEventSynchronize", 0, trace::flag::host_wait, &where);
  if (CUresult r = driver().cuEventSynchronize(event_); r != CUDA_SUCCESS)
    throw_cu(r, "cuEventSynchronize", describe(), where);
}

float event_ref::elapsed_ms(event_ref start, event_ref end, std::source_location where) {
  float ms = 0;
  if (CUresult r = driver().cuEventElapsedTime(&ms, start.get(), end.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuEventElapsedTime",
             "from " + start.describe() + " to " + end.describe() +
                 (r == CUDA_ERROR_INVALID_HANDLE
                      ? " (both must be timing events, event_options{.timing = true}, and recorded before)"
                      : ""),
             where);
  return ms;
}

event event::create(context_ref ctx, event_options options, std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::event::create", "empty context", where);
  unsigned flags = 0;
  if (!options.timing) flags |= CU_EVENT_DISABLE_TIMING;
  if (options.blocking_sync) flags |= CU_EVENT_BLOCKING_SYNC;
  if (options.interprocess) {
    if (options.timing) detail::throw_invalid("cuasync::event::create", "interprocess events cannot time", where);
    flags |= CU_EVENT_INTERPROCESS;
  }
  scoped_context guard(ctx, where);
  CUevent e = nullptr;
  if (CUresult r = driver().cuEventCreate(&e, flags); r != CUDA_SUCCESS)
    throw_cu(r, "cuEventCreate", "device " + std::to_string(ctx.device_ordinal()), where);
  return event(e, ctx);
}

event& event::operator=(event&& o) noexcept {
  if (this != &o) {
    destroy_nothrow();
    event_ = std::exchange(o.event_, nullptr);
    ctx_ = o.ctx_;
  }
  return *this;
}

void event::destroy_nothrow() noexcept {
  if (!event_) return;
  detail::release_nothrow_without_context(ctx_.get(), "cuEventDestroy", event_,
                                          [&](const auto& d) { return d.cuEventDestroy(event_); });
  event_ = nullptr;
}

}  // namespace cuasync
