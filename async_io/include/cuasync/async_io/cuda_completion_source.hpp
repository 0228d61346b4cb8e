#pragma once
//! @file The CUDA completion source: `cuEventQuery` on events from per-context pools of timing-disabled events
//! (seed §6.3). A wait on a stream records a pooled event; the service's FIFO for that stream is polled at its head
//! only (a query of a finished event costs ~1.3 µs on the H200, of a pending one ~0.1 µs).
//!
//! Host completion words: a wait recorded alone on its stream (no other outstanding) also gets a word in mapped
//! pinned memory, written by the stream (`cuStreamWriteValue64`, with a fence) after the work before it; seeing it
//! done is then a memory read instead of a finished-event query (~1.3 µs), for ~0.7 µs more at record. Only while
//! it pays: when later waits joined the stream's last lone wait before it completed (one query of their newest
//! answers for all of them), the next lone wait gets none, until one stays alone again. A pending word falls back to
//! the event, which reports device errors (a faulted context never writes the word). Devices without 64-bit stream
//! memory operations use events only; `use_host_words(false)` turns words off.

#include <cuasync/async_io/completion_service.hpp>

#include <cuasync/driver/event.hpp>
#include <cuasync/driver/stream.hpp>

#include <cstddef>
#include <memory>
#include <utility>

namespace cuasync {

class cuda_completion_source;

//! A pooled, timing-disabled event recorded on a stream, not yet handed to a wait. Move-only; returns the event to
//! its pool when destroyed unwaited.
class pooled_event {
 public:
  pooled_event() = default;
  pooled_event(pooled_event&& o) noexcept
      : token_(std::exchange(o.token_, 0)), event_(o.event_), stream_(o.stream_), order_(o.order_),
        queue_key_(o.queue_key_) {}
  pooled_event& operator=(pooled_event&& o) noexcept;
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;
  ~pooled_event();

  event_ref event() const noexcept { return event_; }
  stream_ref stream() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return token_ != 0; }
  //! Hands the pool slot over (to a wait); the caller must release it through the source.
  std::uintptr_t release() noexcept { return std::exchange(token_, 0); }

 private:
  friend class cuda_completion_source;
  pooled_event(std::uintptr_t token, event_ref e, stream_ref s, std::uint64_t order, std::uintptr_t queue_key) noexcept
      : token_(token), event_(e), stream_(s), order_(order), queue_key_(queue_key) {}
  std::uintptr_t token_ = 0;
  event_ref event_;
  stream_ref stream_;
  std::uint64_t order_ = 0;  // recording order on stream_ (wait_target::order); 0 for the special streams
  // The FIFO the wait joins: the stream's id (cuStreamGetId), which no later stream reuses (handles are reused, and
  // a new stream's newest event must never complete an older stream's waits); the handle for the special streams.
  std::uintptr_t queue_key_ = 0;
};

//! The process's CUDA completion source. Thread-safe.
class cuda_completion_source final : public completion_source {
 public:
  static cuda_completion_source& instance();

  //! Takes an event from the pool of `s`'s context (creating one when the pool is empty) and records it on `s`.
  //! Host cost: one `cuEventRecord` (~0.15 µs), plus one `cuStreamWriteValue64` (~0.7 µs) for a host word (see
  //! above). Records on one stream are numbered in the order they reach the stream, so a wait on the newest
  //! completes the older ones too (except on CU_STREAM_LEGACY / CU_STREAM_PER_THREAD, one handle for many streams).
  //! @throws cuda_error
  pooled_event record(stream_ref s, std::source_location where = std::source_location::current());
  //! Host completion words on (the default) or off, for waits recorded from now on.
  void use_host_words(bool on) noexcept;
  //! How many waits so far were given a host word.
  std::uint64_t host_word_waits() const noexcept;
  //! Events created by the pool of `ctx` so far, and how many of them are idle in the pool now.
  std::size_t created_events(context_ref ctx) const;
  std::size_t idle_events(context_ref ctx) const;

  //! The wait target for an already-recorded pooled event (queue: its stream; group: its context; order: its
  //! recording order).
  static wait_target target(pooled_event e, std::shared_ptr<void> keep_alive);
  //! The wait target for a caller's event (queue: the event itself; no order; the event is not returned to any pool).
  static wait_target target(event_ref e, std::shared_ptr<void> keep_alive);

  poll_result query(std::uintptr_t token) noexcept override;
  void release(std::uintptr_t token) noexcept override;

  //! True for the `CUresult`s after which the context is unusable, so every wait on it fails (failure_scope::group).
  static bool is_sticky(CUresult r) noexcept;

 private:
  cuda_completion_source() = default;
  struct pools;
  pools& state() const;
};

namespace detail {
//! Starters: what the initiation of each async_wait form does once it has the handler (defined in async_io).
struct event_starter {
  event_ref e;
  std::shared_ptr<void> keep_alive;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) &&;
};
struct stream_starter {
  stream_ref s;
  std::shared_ptr<void> keep_alive;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) &&;
};
struct pooled_starter {
  pooled_event e;
  std::shared_ptr<void> keep_alive;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) &&;
};
struct target_starter {
  wait_target t;
  void operator()(completion_service& s, boost::asio::any_io_executor ex, wait_handler h, wait_hints hints) && {
    s.start_wait(std::move(ex), std::move(t), std::move(h), hints);
  }
};
}  // namespace detail

}  // namespace cuasync
