// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Frees that block, kept off threads that must not block. `cuMemFree` and `cuMemFreeHost` wait until the whole
//! device is idle (a `device_buffer` freed behind a 1 s kernel held its io thread 1.2 s on the H200). A thread marked
//! "must not block" (async_io marks its io threads; any thread may mark itself) hands such frees to one reaper thread
//! instead, which makes the same call: the driver's own wait keeps the memory's stream order (the free happens once
//! the work enqueued before it is done), on the reaper rather than on the io thread.
//!
//! Teardown: a primary context's last release (`primary_context`'s destructor) first waits for the frees handed over
//! so far, so none outlives its context (a later context could reuse the handle and the address); the reaper drains
//! what is left at process exit. A context created and destroyed by the caller (`cuCtxDestroy`) is not seen: call
//! `drain_deferred_frees()` before destroying one whose memory was freed on a marked thread.

#include <cuasync/driver/detail/driver_api.hpp>

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
//! Whether the calling thread hands blocking frees to the reaper: it is marked, or `CUASYNC_DEFER_BLOCKING_FREES=1`
//! is set in the environment (every thread then does; read once).
bool thread_must_not_block() noexcept;

//! Waits (blocking) until every free handed to the reaper before the call is done. Never throws. Called on the
//! reaper thread itself (a free's owner destroyed there), returns at once.
void drain_deferred_frees() noexcept;

//! Counters of the reaper (for tests and diagnostics).
struct deferred_free_stats {
  std::uint64_t handed_over = 0;  //!< frees handed to the reaper since the process started
  std::uint64_t done = 0;         //!< ... of which it has made
};
deferred_free_stats deferred_frees() noexcept;

namespace detail {
//! A free that may block (`cuMemFree`, `cuMemFreeHost`), named `api`, of `handle` in `ctx`: made here through
//! `release_nothrow`, or handed to the reaper when this thread must not block (and made here after all when the
//! reaper cannot take it: no memory, or the process is exiting). Never throws.
void release_blocking_nothrow(CUcontext ctx, const char* api, const void* handle, std::size_t bytes,
                              CUresult (*release)(const driver_entry_points&, const void* handle)) noexcept;
}  // namespace detail

}  // namespace cuasync
