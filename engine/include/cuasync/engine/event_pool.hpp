// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The one event pool of a context and the one pooled event type. The parts of cuasync that record events for
//! their own use (a wait, a cross-stream dependency of a tracked buffer, the last use of a pinned block, a staged
//! copy's chunk; not the slot pipeline, which owns one event per slot) take a timing-disabled event from its context's
//! pool (no `cuEventCreate` on hot paths)
//! and gives it back when done.
//!
//! A pool belongs to its context and lives while anything uses it: `event_pool::for_context` finds it (one per
//! context, shared by runtimes, async_io and the C ABI), and every event on loan keeps it alive. When the context is
//! gone (destroyed, or a primary context released by everyone) the pool is dropped: `for_context` recognises a
//! context by its unique id (`cuCtxGetId`), not only by its handle, which a later context can reuse.
//!
//! Host completion words: a slot may also own a word in mapped pinned memory that the stream writes
//! (`cuStreamWriteValue64`) after the work before it, so the host sees completion by a memory read instead of a
//! ~1.3 µs query of a finished event (docs/architecture.md, "Seeing completion").

#include <cuasync/driver/event.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/completion_source.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <source_location>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cuasync {

namespace detail {
//! Waits for the work on `s` (errors ignored): what a failed record does before throwing.
void settle_stream(stream_ref s) noexcept;
}  // namespace detail

class event_pool;
struct wait_target;

namespace detail {
//! One pooled event and (where the device supports it) its host completion word. A token of the CUDA completion
//! source is a slot's address.
struct event_slot {
  CUevent event = nullptr;
  event_pool* pool = nullptr;
  std::shared_ptr<event_pool> lent;  // keeps the pool alive while the slot is on loan
  std::uint64_t* word = nullptr;     // in mapped pinned memory; null without 64-bit stream memory operations
  CUdeviceptr word_device = 0;
  std::uint64_t written = 0;     // the last value enqueued to the word (they only grow)
  std::uint64_t expected = 0;    // the value this loan's word write stores; 0: only the event tells
  // This loan recorded no event: the word tells done, the event only a fault (atomic: event_pool::quiet_in reads it
  // from a teardown's thread).
  std::atomic<bool> word_alone{false};
  std::uint64_t stream_key = 0;  // the stream whose wait count this loan holds (0: none)
  std::uint64_t first_seq = 0;   // the stream's record count when this wait was its only one (0: it was not)
  std::uint64_t admit_key = 0;   // the stream whose admission place this loan holds (admission.hpp); 0: none
  trace::flight::mark flight;    // this wait in its stream's flight ring (trace/flight_recorder.hpp); empty: off
  // When a pass last asked this loan's event while its word was still to come (0: no pass has seen it yet).
  std::atomic<long long> fault_checked_ns{0};
};
}  // namespace detail

//! A pooled event recorded on a stream. Move-only; returns to its pool when destroyed (or, handed to a wait, when the
//! wait is done).
class pooled_event {
 public:
  pooled_event() = default;
  pooled_event(pooled_event&& o) noexcept
      : slot_(std::exchange(o.slot_, nullptr)), stream_(o.stream_), order_(o.order_), queue_key_(o.queue_key_) {}
  pooled_event& operator=(pooled_event&& o) noexcept;
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;
  ~pooled_event();

  event_ref event() const noexcept;
  stream_ref stream() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return slot_ != nullptr; }
  //! What the recorded work's state is, without blocking: the host word first (a memory read), then the event.
  poll_result poll() const noexcept;
  //! True when the recorded work has completed, false while pending. @throws cuda_error with the device error.
  bool query(std::source_location where = std::source_location::current()) const;
  //! Makes `s` wait (on the device) for the recorded work. @throws cuda_error
  void make_wait(stream_ref s, std::source_location where = std::source_location::current()) const;

  //! Hands the slot over to a wait of the CUDA completion source (queue: the stream; group: the context; order: the
  //! recording order). The event goes back to its pool once the wait is done. @throws cuda_error for an empty (moved-
  //! from) event, before any wait exists: its token would be null, which the poller would read as a slot.
  wait_target into_target(std::shared_ptr<void> keep_alive = nullptr,
                          std::source_location where = std::source_location::current()) &&;
  //! Gives up the slot (the caller releases it through `cuda_completion_source::release`).
  detail::event_slot* release() noexcept { return std::exchange(slot_, nullptr); }

 private:
  friend class event_pool;
  friend class cuda_completion_source;
  pooled_event(detail::event_slot* slot, stream_ref s, std::uint64_t order, std::uintptr_t queue_key) noexcept
      : slot_(slot), stream_(s), order_(order), queue_key_(queue_key) {}
  detail::event_slot* slot_ = nullptr;
  stream_ref stream_;
  std::uint64_t order_ = 0;  // recording order on stream_ (wait_target::order); 0: none promised
  // The FIFO a wait joins: the stream's id (cuStreamGetId), which no later stream reuses (handles are reused, and a
  // new stream's newest event must never complete an older stream's waits); the handle for the special streams.
  std::uintptr_t queue_key_ = 0;
};

//! The events of one context. Thread-safe.
class event_pool : public std::enable_shared_from_this<event_pool> {
 public:
  //! The pool of `ctx` (created on first use). @throws cuda_error
  static std::shared_ptr<event_pool> for_context(context_ref ctx,
                                                 std::source_location where = std::source_location::current());
  //! Pools whose context is gone are dropped now (their events are released as their loans end). Runs by itself when
  //! a new context is seen; runtimes call it when they are created and destroyed.
  static void sweep() noexcept;
  //! Drops the pool of `ctx` now if nothing holds it (no runtime, loan, ticket or caller; default admission bounds),
  //! destroying its events and host words while the context is still alive: a runtime calls it before letting go of
  //! its context, so the pinned words are not left to the context's end (compute-sanitizer counts them as leaked).
  //! A later use of `ctx` makes a new pool. Call while `ctx` is alive. Held still (a completion being delivered as
  //! the runtime goes, the grower's slab on its way), the pool is dropped when the last such holder lets go through
  //! `let_go` (loans and admission tickets do): not left to the context's end. Its background work is settled first
  //! (`settle_background`).
  static void release_if_unused(context_ref ctx) noexcept;
  //! The background work for the pool of `ctx` (a slab of host words, a runtime's prepared slots) that is queued on
  //! the grower does nothing when it runs, and the work running is waited for; a pool still in use asks again as it
  //! needs. Runs before cuasync releases a primary context (`primary_context`'s destructor, through the driver's
  //! release hook) and in `release_if_unused`: a slab the grower zeroed while the context's release freed it was a
  //! write into freed memory (ASan, a child that released its primary context right after a first record). A caller
  //! that destroys a context of its own that it used the engine on calls `release_if_unused` first. A pool that a
  //! runtime uses is left alone (`runtime_joined`): the runtime keeps its context, so a primary context's release
  //! meanwhile (a `device::memory_info`) is not the last, and the runtime settles the pool as it goes. Never throws.
  static void settle_background(CUcontext ctx) noexcept;
  //! Lets go of `pool`: the last reference after a `release_if_unused` that found the pool held drops it (as that
  //! call would have). cuasync's own holders (loans, tickets, the grower's tasks, a runtime's pinned pool, staging ring
  //! and tracked buffers) end this way. Never throws.
  static void let_go(std::shared_ptr<event_pool>&& pool) noexcept;
  //! A runtime uses its context's pool for as long as it lives, and a context may have several: while one does,
  //! `release_if_unused` leaves the pool alone (not dropped, not marked for its last holder, its background work not
  //! settled): the runtime that stays keeps its coming host words, and its give-backs take no registry lock
  //! (`let_go` of a marked pool does). `runtime_joined` once the runtime's
  //! construction can no longer fail; `runtime_left` when it goes, after its members let go of the pool: drops the
  //! runtime's reference and, when it was the context's last runtime, calls `release_if_unused(ctx)`. Never throw.
  static void runtime_joined(event_pool& pool) noexcept;
  static void runtime_left(std::shared_ptr<event_pool>&& pool, context_ref ctx) noexcept;
  //! Pools alive in the process (for tests of teardown).
  static std::size_t live_pools() noexcept;
  //! The awaited operations of `ctx` holding an admission place now (their GPU work not seen done yet), read from the
  //! registry without taking a reference to the pool (which would keep `release_if_unused` from dropping it): what
  //! a teardown's frees are held for (driver/blocking_free.hpp's `deferred_until_scope`). 0 without a pool. Never
  //! throws.
  static std::uint32_t admitted_in(CUcontext ctx) noexcept;
  //! No awaited operation of `ctx` holds a place and every event its pool has lent out reports done (`cuEventQuery`,
  //! which never blocks): what a teardown's frees are held for. A stream wait holds no place but its event stays lent
  //! while the work before it runs; a free made then would wait inside the driver (cuMemFreeHost waits for the
  //! device) holding a lock that every other thread's driver call needs (seen on the H200: `cuStreamDestroy` stuck
  //! behind the reaper's `cuMemFreeHost`). True without a pool. Never throws.
  static bool quiet_in(CUcontext ctx) noexcept;

  ~event_pool();
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  //! Records a plain pooled event on `s`: for another stream to wait on (`make_wait`) or the host to `poll`. Not a
  //! wait of the completion source: no order, no host word. @throws cuda_error — after waiting (blocking) for the
  //! work already on `s`: its completion would otherwise be unknowable, and the caller frees what it used on failure.
  pooled_event record(stream_ref s, std::source_location where = std::source_location::current());

  context_ref context() const noexcept { return ctx_; }
  //! A pool's host words never come from the thread that takes a slot (a `cuMemHostAlloc` there waits behind any
  //! other thread's: a C ABI runtime's staging reservation made a first pageable copy's call take 126 ms on an H100):
  //! the grower thread makes each slab ahead of need, and a slot made while no word is free has none until it comes
  //! back. A runtime readies its pool at creation: `expect_prepare()`, on the creating thread, promises a `prepare`
  //! (no other growth is asked for meanwhile); `prepare(slots)`, on a thread that may block (the runtime's grower),
  //! makes at least `slots` idle slots ready, with a slab of words if they need one, allocated outside the pool's
  //! lock. Neither throws: on a failure the slots go on without words (their waits seen by event queries).
  void expect_prepare() noexcept;
  void prepare(std::size_t slots, std::source_location where = std::source_location::current()) noexcept;
  //! Events created by this pool so far, and how many are idle in it now.
  std::size_t created() const;
  std::size_t idle() const;

  //! The context's admission bounds (admission.hpp); changes apply to operations admitted from now on.
  void set_admission_limits(admission_limits limits);
  admission_limits get_admission_limits() const;
  //! Awaited operations holding a place now, and those waiting for one.
  std::uint32_t admitted() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  std::uint32_t waiting_for_admission() const noexcept { return waiting_.load(std::memory_order_relaxed); }

  //! Takes a slot (creating one when none is idle). @throws cuda_error
  detail::event_slot* acquire(std::source_location where = std::source_location::current());
  //! Returns a slot (on loan from this pool). Never throws.
  void give_back(detail::event_slot* slot) noexcept;

 private:
  event_pool(context_ref ctx, unsigned long long id);
  detail::event_slot* create_slot(std::source_location where);  // under mutex_
  void learn_words_supported(std::source_location where);        // under mutex_: words_supported_, asked once
  //! Under mutex_: gives `slot` a host word if one is free (none without 64-bit stream memory operations), and asks
  //! the grower thread for the next slab when few are left. Never blocks, never throws.
  void take_word(detail::event_slot& slot) noexcept;
  //! On the grower thread (or prepare's): a new slab, allocated outside the lock; idle slots without a word get one.
  void grow_words(std::source_location where) noexcept;
  //! The grower's task: grow_words, unless the pool's background work was settled since `epoch` (when it was asked).
  void grow_in_background(std::uint64_t epoch) noexcept;
  //! Background work (the grower's slab, a runtime's prepare) starts with begin_background, which refuses work asked
  //! for before the last settle (`epoch`: background_epoch_ when it was asked for), and ends with end_background.
  //! Under mutex_.
  bool begin_background_locked(std::uint64_t epoch) noexcept;
  void end_background_locked() noexcept;
  void settle_background() noexcept;
  //! release_if_unused's work: `only`, when given, is the pool a late holder let go of (another may be registered
  //! for the context by now); `known_alive`: the caller holds the context.
  static void drop_if_unused(CUcontext ctx, const event_pool* only, bool known_alive) noexcept;
  pinned_buffer new_slab(std::source_location where) const;  // zeroed host words, 512 of them
  context_ref ctx_;
  unsigned long long id_;
  bool context_known_alive_ = false;  // dropped by release_if_unused: the destructor need not ask the driver
  std::atomic<bool> release_when_unused_{false};  // release_if_unused found it held: its last holder drops it
  std::uint32_t runtimes_ = 0;                    // under the registry's lock: the runtimes using the pool
  std::uint64_t background_epoch_ = 0;  // under mutex_: one more at each settle; older asks do nothing
  std::uint64_t prepare_epoch_ = 0;     // under mutex_: the epoch expect_prepare's promise was made in
  bool prepare_promised_ = false;       // under mutex_: expect_prepare was called, prepare not yet
  bool background_running_ = false;     // under mutex_
  std::condition_variable background_done_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<detail::event_slot>> slots_;  // every slot this pool made
  std::vector<detail::event_slot*> idle_;
  int words_supported_ = -1;  // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, read once; -1: not yet
  std::vector<pinned_buffer> slabs_;        // the words, 512 to a slab, handed out in order
  std::vector<CUdeviceptr> slab_devices_;  // each slab's device address (asked once, when it is made)
  std::size_t words_used_ = 0;
  // A slab is coming from the grower thread (or expect_prepare() promised one): no other growth is asked for.
  bool growth_pending_ = false;
  long long growth_failed_ns_ = 0;  // when the last growth failed (completion_queues::now_ns; 0: it did not)

  // Admission, driven by cuda_completion_source (the per-stream counts live with its stream states).
  friend class cuda_completion_source;
  std::atomic<std::uint32_t> limit_stream_{admission_limits{}.per_stream};
  std::atomic<std::uint32_t> limit_context_{admission_limits{}.per_context};
  std::atomic<std::uint32_t> in_flight_{0};
  std::atomic<std::uint32_t> waiting_{0};
  std::mutex admission_mutex_;  // before any stream state's lock
  std::unordered_map<std::uint64_t, std::deque<admission_waiter*>> waiters_;  // by stream id, in arrival order
  std::deque<std::uint64_t> waiting_streams_;  // streams with waiters, each once, served in turn
  // Places granted and not yet handed to their waiters, in grant order; one thread hands them over at a time
  // (`handing_over_`), so two threads making room at once cannot deliver a stream's waiters out of order.
  std::vector<std::pair<admission_waiter*, admission_ticket>> granted_;
  std::vector<std::pair<admission_waiter*, admission_ticket>> delivering_;  // the handing-over thread's
  bool handing_over_ = false;
};

}  // namespace cuasync
