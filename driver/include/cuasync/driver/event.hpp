// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Events: `event_ref` (non-owning) and `event` (owning, move-only). Timing is disabled unless asked for:
//! timing events cost more to record and query.

#include <cuasync/driver/stream.hpp>

#include <source_location>
#include <utility>

namespace cuasync {

//! Options for `event::create`.
struct event_options {
  bool timing = false;         //!< allow `elapsed_ms`; costs more to record and query
  bool blocking_sync = false;  //!< `synchronize()` sleeps instead of spinning
  bool interprocess = false;   //!< shareable with `cuIpcGetEventHandle` (needs timing off)
};

//! An event this object does not own.
class event_ref {
 public:
  event_ref() = default;
  event_ref(CUevent e, context_ref ctx) noexcept : event_(e), ctx_(ctx) {}

  CUevent get() const noexcept { return event_; }
  context_ref context() const noexcept { return ctx_; }
  explicit operator bool() const noexcept { return event_ != nullptr; }

  //! Enqueues the event on `s`: it completes when all work submitted to `s` before it has. @throws cuda_error (also
  //! for an empty `s`, which the driver would take for the legacy default stream)
  void record(stream_ref s, std::source_location where = std::source_location::current()) const {
    if (!s) [[unlikely]] detail::throw_invalid("cuasync::event_ref::record", "empty stream", where);
    if (CUresult r = detail::driver().cuEventRecord(event_, s.get()); r != CUDA_SUCCESS) [[unlikely]]
      detail::throw_cu(r, "cuEventRecord", "event " + detail::handle_string(event_) + " on " + s.describe(), where);
  }
  //! The raw query result: CUDA_SUCCESS (done), CUDA_ERROR_NOT_READY (pending), or the device error. Never throws
  //! once the driver is loaded; for pollers.
  CUresult query_result() const noexcept { return detail::driver().cuEventQuery(event_); }
  //! True when the recorded work has completed, false while pending. @throws cuda_error with a device error.
  bool query(std::source_location where = std::source_location::current()) const {
    CUresult r = query_result();
    if (r == CUDA_SUCCESS) return true;
    if (r == CUDA_ERROR_NOT_READY) return false;
    detail::throw_cu(r, "cuEventQuery", describe(), where);
  }
  //! Host-blocking: waits for the recorded work. @throws cuda_error with a device error.
  void synchronize(std::source_location where = std::source_location::current()) const;
  //! Milliseconds between two completed timing events. @throws cuda_error (e.g. when timing is disabled or an event
  //! was never recorded)
  static float elapsed_ms(event_ref start, event_ref end, std::source_location where = std::source_location::current());

  std::string describe() const;
  friend bool operator==(event_ref a, event_ref b) noexcept { return a.event_ == b.event_; }

 protected:
  CUevent event_ = nullptr;
  context_ref ctx_;
};

//! An event and the caller's line: what an awaited wait of it names (in the timeline and in its errors).
struct located_event {
  event_ref event;
  std::source_location where;
  located_event(event_ref e, std::source_location w = std::source_location::current()) noexcept  // NOLINT: implicit
      : event(e), where(w) {}
};

//! An owned event. Move-only.
class event : public event_ref {
 public:
  event() = default;
  //! Creates an event in `ctx` (timing disabled unless `options.timing`). @throws cuda_error
  static event create(context_ref ctx, event_options options = {},
                      std::source_location where = std::source_location::current());
  static event from_native_handle(CUevent e, context_ref ctx) noexcept { return event(e, ctx); }

  event(event&& o) noexcept : event_ref(std::exchange(o.event_, nullptr), o.ctx_) {}
  event& operator=(event&& o) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { destroy_nothrow(); }

  CUevent release() noexcept { return std::exchange(event_, nullptr); }

 private:
  event(CUevent e, context_ref ctx) noexcept : event_ref(e, ctx) {}
  void destroy_nothrow() noexcept;
};

}  // namespace cuasync
