// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Streams: `stream_ref` (non-owning; adopts a framework's CUstream) and `stream` (owning, move-only).
//! Streams are non-blocking by default: the legacy default stream is never used implicitly (it serializes with every
//! blocking stream).

#include <cuasync/driver/context.hpp>

#include <source_location>
#include <string>
#include <utility>

namespace cuasync {

class event_ref;

//! Options for `stream::create`.
struct stream_options {
  //! `CU_STREAM_NON_BLOCKING`: no implicit synchronisation with the legacy default stream.
  bool non_blocking = true;
  //! Lower numbers are higher priority; see `context_ref::stream_priority_range()`. A hint to the scheduler
  //! (hints, not preemption), clamped by the driver to the valid range.
  int priority = 0;
};

//! A stream this object does not own.
class stream_ref {
 public:
  stream_ref() = default;
  stream_ref(CUstream s, context_ref ctx) noexcept : stream_(s), ctx_(ctx) {}

  //! Adopts a stream created elsewhere (raw `cuStreamCreate`, PyTorch's `current_stream().cuda_stream`), without
  //! ownership; its context and id are queried (the reference names that stream: use it while the stream lives).
  //! The legacy default stream (null) is refused: it serialises with every blocking stream; pass
  //! `CU_STREAM_PER_THREAD` or a created stream. @throws cuda_error
  static stream_ref adopt(CUstream s, std::source_location where = std::source_location::current());

  CUstream get() const noexcept { return stream_; }
  context_ref context() const noexcept { return ctx_; }
  explicit operator bool() const noexcept { return stream_ != nullptr; }

  //! Enqueues a wait: work submitted to this stream later starts after `e`'s recorded work completes. The host does
  //! not wait. @throws cuda_error (also for an empty stream_ref, here and below: never the legacy default stream)
  void wait(event_ref e, std::source_location where = std::source_location::current()) const;
  //! True when all work submitted so far has completed; false while some is pending. Never blocks.
  //! @throws cuda_error with the device error (e.g. CUDA_ERROR_ILLEGAL_ADDRESS) if the work failed.
  bool query(std::source_location where = std::source_location::current()) const;
  //! Host-blocking: waits until all submitted work has completed. @throws cuda_error with a device error.
  void synchronize(std::source_location where = std::source_location::current()) const;
  //! Enqueues `fn(user_data)` to run on a driver thread after the work before it. It stalls the stream while it runs
  //! and must not call CUDA; it never runs if the context faults. Prefer events (async_io). @throws cuda_error
  void launch_host_func(void (*fn)(void*), void* user_data,
                        std::source_location where = std::source_location::current()) const;
  int priority(std::source_location where = std::source_location::current()) const;
  unsigned flags(std::source_location where = std::source_location::current()) const;
  //! The driver's unique id of this stream (`cuStreamGetId`): unlike the handle, never reused by a later stream in
  //! the process, so it can key per-stream state that outlives a stream. A stream made by `stream::create` or
  //! `stream_ref::adopt` (and a `stream_ref` copied from it) knows it from then on: no driver call per use (every
  //! awaited operation keys its admission and FIFO by it); a reference made from a bare handle asks the driver.
  //! @throws cuda_error
  unsigned long long id(std::source_location where = std::source_location::current()) const {
    return id_ ? id_ : ask_id(where);
  }
  //! The id of whatever stream the handle names now, always asked of the driver: a known id is the stream this
  //! reference was made for, which the handle may no longer name (destroyed, its handle reused). @throws cuda_error
  unsigned long long ask_id(std::source_location where = std::source_location::current()) const;
  //! True while the stream is being captured into a CUDA graph (`cuStreamIsCapturing`: a capture under way, or one
  //! invalidated and not yet ended): work enqueued now becomes graph nodes and runs only when the graph is launched.
  //! @throws cuda_error
  bool is_capturing(std::source_location where = std::source_location::current()) const;

  //! "stream 0x..., device N" for error messages.
  std::string describe() const;

  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.stream_ == b.stream_; }

 protected:
  CUstream stream_ = nullptr;
  context_ref ctx_;
  unsigned long long id_ = 0;  // known from stream::create or adopt (0: ask the driver)
};

//! An owned stream, destroyed with `cuStreamDestroy` (the driver lets already-enqueued work finish). Move-only.
class stream : public stream_ref {
 public:
  stream() = default;
  //! Creates a stream in `ctx`. @throws cuda_error
  static stream create(context_ref ctx, stream_options options = {},
                       std::source_location where = std::source_location::current());
  //! Takes ownership of `s`, which must belong to `ctx`.
  static stream from_native_handle(CUstream s, context_ref ctx) noexcept { return stream(s, ctx); }

  stream(stream&& o) noexcept : stream_ref(std::exchange(o.stream_, nullptr), o.ctx_) { id_ = std::exchange(o.id_, 0); }
  stream& operator=(stream&& o) noexcept;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { destroy_nothrow(); }

  //! Gives up ownership and returns the handle.
  CUstream release() noexcept {
    id_ = 0;
    return std::exchange(stream_, nullptr);
  }

 private:
  stream(CUstream s, context_ref ctx) noexcept : stream_ref(s, ctx) {}
  void destroy_nothrow() noexcept;
};

//! Sets the calling thread's stream-capture interaction mode (`cuThreadExchangeStreamCaptureMode`) for its lifetime
//! and restores the previous mode when destroyed. `CU_STREAM_CAPTURE_MODE_RELAXED` lets this thread make calls the
//! driver deems unsafe during a capture (`cuEventQuery`, `cuStreamQuery`...) without invalidating another thread's
//! capture begun in global mode (`torch.cuda.graph`'s). Not movable: the mode belongs to the thread.
class thread_capture_mode {
 public:
  //! @throws cuda_error (nothing changed)
  explicit thread_capture_mode(CUstreamCaptureMode mode, std::source_location where = std::source_location::current());
  ~thread_capture_mode();
  thread_capture_mode(const thread_capture_mode&) = delete;
  thread_capture_mode& operator=(const thread_capture_mode&) = delete;

 private:
  CUstreamCaptureMode previous_;
};

//! A stream and the caller's source location. Functions whose last parameters are variadic (kernel arguments, a
//! completion token) take their stream as this, so that errors name the caller's line: the conversion from a stream
//! happens at the call, where `std::source_location::current()` is the caller's.
struct located_stream {
  stream_ref stream;
  std::source_location where;
  located_stream(stream_ref s, std::source_location w = std::source_location::current()) noexcept
      : stream(s), where(w) {}
};

}  // namespace cuasync
