// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The CUDA completion source: waits on GPU work are pooled events (event_pool.hpp) recorded on streams, and
//! a query is a host-word read or a `cuEventQuery` (a query of a finished event costs ~1.3 µs on the H200, of a
//! pending one ~0.1 µs: the engine's search makes one finished query per stream and pass).
//!
//! Records on one stream are numbered in the order they reach the stream, so one query of a stream's newest wait
//! answers for all before it (not on CU_STREAM_LEGACY / CU_STREAM_PER_THREAD: one handle, many streams).
//!
//! Host completion words: a wait recorded alone on its stream also gets a word written by the stream
//! (`cuStreamWriteValue64`, with a fence) after the work before it, so seeing it done is a memory read, for ~0.7 µs
//! more at record. Only while it pays: when later waits joined the stream's last lone wait before it completed (one
//! query of their newest answers for all), the next lone wait gets none, until one stays alone again. A pending word
//! falls back to the event, which reports device errors (a faulted context never writes the word). With words
//! alone (`use_words_alone`, on by default), a wait that only completes (`record_wait`: its event is never handed
//! out) and gets a word records no event beside it: its fault check asks the slot's event all the same, which a
//! faulted context answers with its error whatever that event recorded last (an H100 answered
//! CUDA_ERROR_LAUNCH_FAILED for events recorded after a trap, finished before it and never recorded).
//!
//! Admission (admission.hpp) is kept here too, beside the per-stream counts it needs.

#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <cuasync/driver/stream.hpp>

#include <cstddef>
#include <memory>
#include <source_location>

namespace cuasync {

//! The process's CUDA completion source. Thread-safe.
class cuda_completion_source final : public completion_source {
 public:
  static cuda_completion_source& instance();

  //! Records a wait on `s`: an event from the pool of `s`'s context (and a host word, see above). Host cost: one
  //! `cuEventRecord` (~0.15 µs), plus one `cuStreamWriteValue64` (~0.7 µs) for a word. @throws cuda_error, once the
  //! work already on `s` has completed (a blocking wait, on this failure path only: the caller learns of the failure
  //! when no enqueued work uses its memory any more).
  pooled_event record(stream_ref s, std::source_location where = std::source_location::current());
  //! The same for an admitted operation: the wait takes over `ticket`'s place, given back when its event completes.
  //! `ticket` must have been admitted on `s` (its context's pool and the stream's key are taken from it, not looked up
  //! again): one on another stream is refused (compared by handle, no driver call) like an empty stream, before
  //! anything is recorded and without waiting for `s`; its place is given back.
  pooled_event record(stream_ref s, admission_ticket ticket,
                      std::source_location where = std::source_location::current());
  //! `record(s, ticket).into_target(keep_alive)`, for a wait whose event nobody else sees: with `use_words_alone`,
  //! a wait given a host word records no event beside it. @throws cuda_error (as record)
  wait_target record_wait(stream_ref s, admission_ticket ticket, std::shared_ptr<void> keep_alive = {},
                          std::source_location where = std::source_location::current());

  //! A place for an operation on `s` if there is room now and nobody waits before it on `s`; otherwise an empty
  //! ticket (then `wait_admission`). `hold`: the operation holds `s` until `end_hold` (or the ticket's end).
  //! @throws cuda_error (the stream's context or id cannot be read)
  admission_ticket try_admit(stream_ref s, bool hold = false,
                             std::source_location where = std::source_location::current());
  //! What try_admit looks up for `s` (its context's event pool, its key: a lock and a driver call), kept by a caller
  //! that admits on one stream often (the C ABI's streams). @throws cuda_error
  admission_site site_of(stream_ref s, std::source_location where = std::source_location::current());
  //! try_admit with the lookups done. @throws std::bad_alloc (a stream's first count)
  admission_ticket try_admit(const admission_site& site, bool hold = false);
  //! A credit of up to `n` places on the site's stream, taken in one call (one lock, no per-place refcount), for
  //! operations that give their places back together (the C ABI's launches without a completion): as many as the
  //! stream and its context have room for, on try_admit's terms (nobody waiting is overtaken, a held or granted
  //! stream admits nothing); empty when not even one. Its places are used by the caller's own count and come back
  //! together (`reset`, or one `split` off for a record and the rest when that wait completes).
  //! @throws std::bad_alloc (a stream's first count)
  admission_ticket try_admit_n(const admission_site& site, std::uint32_t n);
  //! Queues `w` for a place on `s`. `w->admitted` is called once room is made — possibly before this returns, on
  //! this thread, when room appeared meanwhile. @throws cuda_error, std::bad_alloc (then `w` is not queued)
  void wait_admission(stream_ref s, admission_waiter* w, bool hold = false,
                      std::source_location where = std::source_location::current());
  //! Takes `w` out of its queue: true when it was still waiting (it will not be admitted), false when it already
  //! was (or is being) admitted.
  bool cancel_admission(admission_waiter* w) noexcept;

  //! Host completion words on (the default) or off, for waits recorded from now on.
  void use_host_words(bool on) noexcept;
  //! Waits of `record_wait` given a host word record no event beside it (on by default; off: an event is recorded
  //! beside every word, as before words alone). For waits recorded from now on.
  void use_words_alone(bool on) noexcept;
  //! How many waits so far were given a host word.
  std::uint64_t host_word_waits() const noexcept;
  //! Events created by the pool of `ctx` so far, and how many of them are idle in the pool now.
  std::size_t created_events(context_ref ctx, std::source_location where = std::source_location::current()) const;
  std::size_t idle_events(context_ref ctx, std::source_location where = std::source_location::current()) const;

  //! The wait target for a caller's event (queue: the event itself; no order; the event is not pooled).
  static wait_target target(event_ref e, std::shared_ptr<void> keep_alive);
  //! The wait target for a pooled event (`std::move(e).into_target(keep_alive)`). @throws cuda_error for an empty one
  static wait_target target(pooled_event e, std::shared_ptr<void> keep_alive,
                            std::source_location where = std::source_location::current()) {
    return std::move(e).into_target(std::move(keep_alive), where);
  }

  poll_result query(std::uintptr_t token) noexcept override;
  void release(std::uintptr_t token) noexcept override;
  //! As `release` for each, with the admission of waiting operations done once per context at the end.
  void release_many(std::span<const std::uintptr_t> tokens) noexcept override;

  //! True for the `CUresult`s after which the context is unusable, so every wait on it fails (failure_scope::group).
  static bool is_sticky(CUresult r) noexcept;

 private:
  friend class admission_ticket;
  friend class event_pool;
  cuda_completion_source() = default;
  //! record's work; `event_hidden`: nobody but the wait sees the event (record_wait), so a word may stand alone.
  pooled_event record_on(stream_ref s, admission_ticket ticket, bool event_hidden, std::source_location where);
  void give_place(event_pool& pool, std::uint64_t stream_key, bool hold, bool granted,
                  std::uint32_t count = 1) noexcept;
  //! give_place's part after the stream's count went down (under its shard's lock): the context's count, and the
  //! operations waiting for room.
  void places_given(event_pool& pool, std::uint32_t count) noexcept;
  void settle_grant(std::uint64_t stream_key) noexcept;
  void end_hold(event_pool& pool, std::uint64_t stream_key) noexcept;
  void admit_waiters(const std::shared_ptr<event_pool>& pool) noexcept;
  struct state;
  state& st() const;
};

}  // namespace cuasync
