// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Frees that block, kept off threads that must not block. `cuMemFree` and `cuMemFreeHost` wait until the whole
//! device is idle (a `device_buffer` freed behind a 1 s kernel held its io thread 1.2 s on the H200). A thread marked
//! "must not block" (async_io marks its io threads; any thread may mark itself) hands such frees to one reaper thread
//! instead, which makes the same call: the driver's own wait keeps the memory's stream order (the free happens once
//! the work enqueued before it is done), on the reaper rather than on the io thread.
//!
//! Each free handed over remembers the life of its context (`cuCtxGetId`, not the handle: handles are reused); the
//! reaper skips one whose life has ended (the context took its memory with it, and the address may be another
//! allocation's by now).
//!
//! Teardown never waits for the GPU unboundedly: a `device_runtime`'s destructor and a pinned or event pool's hand
//! their frees over, then wait for those of their context at most `teardown_free_wait`
//! (`drain_deferred_frees_of`), and so does a primary context's release (`primary_context`'s destructor). In that
//! bound unless the device never goes idle (a kernel that never ends): the context's life is then *abandoned*, later
//! teardown waits for it return at once, and its frees are made if its work ever ends (skipped if its life ended
//! first). At process exit the reaper runs what is queued for at most a bound too, then is left to the process's end.
//! A context created and destroyed by the caller (`cuCtxDestroy`) is not seen: call `drain_deferred_frees_of` before
//! destroying one whose memory was freed on a marked thread.

#include <cuasync/driver/detail/driver_api.hpp>

#include <chrono>
#include <cstdint>
#include <functional>

namespace cuasync {

//! Marks (or unmarks) the calling thread as one that must not block: `device_buffer`, `pinned_buffer` and
//! `managed_buffer` destroyed on it free on the reaper thread. Answers the mark it had. Never throws.
bool set_thread_must_not_block(bool must_not_block) noexcept;
//! Marks the calling thread for its lifetime, then gives it its previous mark back. async_io holds one while it runs
//! a completion handler (a coroutine resumed by an awaited operation runs inside it) and while it polls.
class must_not_block_scope {
 public:
  must_not_block_scope() noexcept : was_(set_thread_must_not_block(true)) {}
  ~must_not_block_scope() { set_thread_must_not_block(was_); }
  must_not_block_scope(const must_not_block_scope&) = delete;
  must_not_block_scope& operator=(const must_not_block_scope&) = delete;

 private:
  bool was_;
};
//! Marks the calling thread as `must_not_block_scope` does, and holds the frees it hands over meanwhile, on the reaper
//! and without a driver call, until `ready()` answers true: a teardown whose context still has awaited operations on
//! the GPU (`ready`: none is left) does not start a free that would wait for them (with a kernel that never ends, a
//! reaper thread inside the driver at process exit). `ready` is polled (1 ms, backing off to 20 ms) and must not
//! block, throw or call the driver; at process exit a free still held is dropped (the process is ending).
class deferred_until_scope {
 public:
  explicit deferred_until_scope(std::function<bool()> ready) noexcept;
  ~deferred_until_scope();
  deferred_until_scope(const deferred_until_scope&) = delete;
  deferred_until_scope& operator=(const deferred_until_scope&) = delete;

 private:
  std::function<bool()> ready_;
  const std::function<bool()>* outer_;
  must_not_block_scope marked_;
};
//! Whether the calling thread hands blocking frees to the reaper: it is marked, or `CUASYNC_DEFER_BLOCKING_FREES=1`
//! is set in the environment (every thread then does; read once).
bool thread_must_not_block() noexcept;

//! Waits (blocking) until every free handed to the reaper before the call is done. Never throws. Called on the
//! reaper thread itself (a free's owner destroyed there), returns at once.
void drain_deferred_frees() noexcept;

//! How long teardown (a runtime's, a pool's, a primary context's release) waits for the frees of its context handed
//! to the reaper: what a free behind the device's running work may take before the context counts as abandoned.
inline constexpr std::chrono::milliseconds teardown_free_wait{1000};

//! Waits (blocking) at most `bound` until every free of `ctx`'s present life handed to the reaper is settled (made, or
//! skipped); true when none is left. False at the bound: the life is marked abandoned, and later calls for it return
//! at once. Returns at once when nothing is pending (no driver call) and on the reaper thread. Never throws.
bool drain_deferred_frees_of(CUcontext ctx, std::chrono::milliseconds bound = teardown_free_wait) noexcept;

//! Counters of the reaper (for tests and diagnostics).
struct deferred_free_stats {
  std::uint64_t handed_over = 0;  //!< frees handed to the reaper since the process started
  std::uint64_t done = 0;         //!< ... of which it has settled (made, or skipped)
  std::uint64_t skipped = 0;      //!< ... of which it skipped: their context's life had ended, or (held by a
                                  //!< `deferred_until_scope`) the process was exiting
  std::uint64_t abandoned = 0;    //!< context lives whose teardown stopped waiting (`drain_deferred_frees_of`)
};
deferred_free_stats deferred_frees() noexcept;

namespace detail {
//! A free that may block (`cuMemFree`, `cuMemFreeHost`), named `api`, of `handle` in `ctx`: made here through
//! `release_nothrow`, or handed to the reaper when this thread must not block (and made here after all when the
//! reaper cannot take it: no memory, or the process is exiting). Never throws. `life` is the context's id when the
//! memory was allocated (`context_life`; 0: unknown, read at the hand-over): once that life has ended the free is not
//! made, here or on the reaper (the context took the memory along, and the address, or the handle's next life, may
//! be another allocation's by now). `life_ended`, when given, runs instead of the release then (a registration goes
//! with its context, its host memory does not: that is still the process's to free).
void release_blocking_nothrow(CUcontext ctx, unsigned long long life, const char* api, const void* handle,
                              std::size_t bytes,
                              CUresult (*release)(const driver_entry_points&, const void* handle, std::size_t bytes),
                              void (*life_ended)(const void* handle, std::size_t bytes) noexcept = nullptr) noexcept;
}  // namespace detail

}  // namespace cuasync
