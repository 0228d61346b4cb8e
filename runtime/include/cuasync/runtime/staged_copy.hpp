// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Staged pageable copies. The driver copies ordinary (pageable) host memory at 8 GB/s H2D and 14–15 GB/s D2H
//! on the H200 against 55 GB/s pinned, and its pageable copy waits on the host for the work ahead of it on the
//! stream. `staged_copier` moves pageable data through a ring of pinned chunks instead: the memcpy team copies chunk
//! i+1 on the host while the DMA of chunk i runs (measured: ~40 GB/s H2D, ~35–50 GB/s D2H).
//!
//! Copies are asynchronous state machines: each chunk's DMA is followed by a pooled event, and the completion engine
//! (engine/completion_callbacks.hpp) reports when a chunk's ring slot is free again; the memcpy team's threads do the
//! host copying. No thread waits for the GPU, and the thread that starts a copy does no copying. The synchronous
//! forms wait (sleeping, not spinning) for the asynchronous one.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/memcpy_team.hpp>
#include <cuasync/runtime/store_choice.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <system_error>
#include <vector>

namespace cuasync::runtime {

struct staged_copy_options {
  //! Pinned chunk size. On the H200 machine 8 MiB chunks moved 1 GiB D2H at 46-52 GB/s against 26 GB/s with 4 MiB,
  //! 64 MiB D2H at 47 against 33; H2D the two were within 5% (bench/runtime measures the alternative side by side).
  std::size_t chunk_bytes = std::size_t{8} << 20;
  std::size_t chunks = 4;  //!< blocks of `chunk_bytes` in the ring (each holds one whole chunk or two halves)
  //! Copies smaller than this go through chunks of half `chunk_bytes`, two to a ring block: twice as many in flight,
  //! and a first DMA after half a chunk's host copy. On an H100 (session 28, four runs, alternated) 4 MiB chunks
  //! eight at a time moved 64 MiB 1.04-1.05x faster H2D in three runs (0.98x in the fourth) and 1.04-1.06x D2H in all
  //! four than 8 MiB chunks four at a time, where 1 GiB H2D was 0.91-0.99x: larger copies keep whole chunks (a copy
  //! with whole chunks takes both halves of a block). As the default on the H200 (five processes): 64 MiB 1.00-1.03x
  //! H2D and 1.04-1.07x D2H over whole chunks. 0: whole chunks for every copy.
  std::size_t half_chunks_below = std::size_t{256} << 20;
  //! Host copy threads; 0 = 3/4 of cores, ≤ 12. As many as the cores (with the synchronous forms' caller copying
  //! too) collapsed to 5-30 GB/s on a 16-core H100 host where 8-12 gave 40-54 (bench/runtime's staged sweep probe).
  unsigned threads = 0;
  //! The copy threads' stores into the pinned ring (H2D) and into the pageable destination (D2H). Regular: on an
  //! H100 (session 27, eight runs) regular stores gave 51-53 GB/s at 1 GiB H2D and 52-54 D2H (0.93-0.97 of the
  //! pinned bound), where `automatic` (which times the host copy alone, not the DMA it slows by taking memory
  //! bandwidth) picked streaming stores in some processes and fell to 44 GB/s; on the H200 regular stores were
  //! 1.13-1.26x faster at 1 GiB both ways. Streaming stores were within 5% either way at 64 MiB H2D.
  store_kind h2d_stores = store_kind::regular;
  store_kind d2h_stores = store_kind::regular;
  //! Copies of at least 4 chunks start and end with smaller chunks (c/8, c/4, c/2), so that the pipeline fills and
  //! drains in an eighth of a chunk's time rather than a whole one's. Off by default: on an H100 (session 27, six
  //! runs with regular stores) copies without the ramp were 1.01-1.10x faster at 64 MiB H2D, 1.03-1.12x D2H and the
  //! same at 1 GiB: the ramp's small DMAs ran at half speed beside the host copies of the chunks after them.
  bool ramp = false;
  //! The synchronous forms (`copy_to_device`, `copy_to_host`) copy parts on the calling thread while they wait, as
  //! `memcpy_team::copy` does: that thread is awake at once where a sleeping team thread comes tens of microseconds
  //! late, and it is blocked in the call anyway. The asynchronous forms never copy on the caller's thread.
  bool caller_copies = true;
};

//! What an asynchronous staged copy reports. Both are called outside the copier's locks, on a cuasync thread (the
//! poller or a copy thread) or on a thread inside one of this copier's calls (a copy started there, or a synchronous
//! copy whose thread copies the team's parts while it waits, may finish another copy's chunk); they must not block,
//! and must not take a lock that a caller of the copier may hold.
class staged_copy_callback {
 public:
  //! Every chunk's DMA is enqueued on the stream: work enqueued on it from now on is ordered after the copy.
  //! Called before `done` (not at all when the copy failed before).
  virtual void enqueued() noexcept {}
  //! The copy completed (D2H: the host destination holds the data; H2D: the data is on the device) or failed with
  //! `ec` (the first error). The last call: the callback may be destroyed in it.
  //! `detail`: the failure's full description when there is one (a `cuda_error` naming the failed call), else null.
  virtual void done(std::error_code ec, std::exception_ptr detail) noexcept = 0;

 protected:
  ~staged_copy_callback() = default;
};

//! Copies between pageable host memory and the device through pinned staging. Thread-safe: copies from several
//! threads share the ring.
//!
//! Sharing. A slot whose DMA waits behind a stream's work (a long kernel) is held until that work is done, and an
//! enqueued DMA cannot be taken back: when copies queued in arrival order alone, a D2H copy behind a 2 s kernel kept
//! a copy on an idle stream waiting 1.97 s (H200). So:
//! - Copies on one stream keep arrival order: a copy takes no slot until every copy before it on that stream has
//!   enqueued all of its DMAs (so a later copy's DMA never overtakes an earlier one's, even with the same
//!   destination).
//! - Copies on different streams do not wait for one another: each free slot goes to the copy holding the fewest
//!   (the earlier one on a tie). Active copies share the ring evenly, a lone copy takes all of it, and unlike a fixed
//!   cap (ring / copies) no slot stays free while a copy could use it.
//! - A copy asks its stream once, when it takes its first slot (`cuStreamQuery`; never per chunk): busy, it holds at
//!   most one slot until one of its DMAs has completed (then the work ahead of it is done). A copy that follows
//!   another of this copier's on the same stream (the same stream id: a reused handle is another stream) whose DMAs
//!   are still to complete does not ask (the stream is busy with those DMAs): it takes that copy's answer, so
//!   back-to-back copies keep the whole ring. Behind a copy whose DMAs are all done, it asks.
//! Work enqueued on a copy's stream after that question, while the copy is still enqueueing chunks, is not seen: the
//! DMAs behind it hold their slots until it is done.
class staged_copier {
 public:
  //! Starts the copy threads, and the pinned ring's allocation on cuasync's background thread, a block of
  //! chunk_bytes per slot, one after another: returns without waiting for it (a cold `cuMemHostAlloc` costs ~0.7 ms
  //! per MiB). Copies started before the first block is there wait for it asynchronously, and use each slot as its
  //! block comes; if not even the first can be allocated they fail with its error, and the next copy tries again.
  //! @throws cuda_error (bad options)
  staged_copier(context_ref ctx, staged_copy_options options = {},
                std::source_location where = std::source_location::current());
  //! The same with copy threads made before (`options.threads` is then theirs): a runtime's, shared with the C ABI's
  //! copies through whole blocks and chunks, and started at the runtime's creation so that no first copy starts them.
  staged_copier(context_ref ctx, staged_copy_options options, std::shared_ptr<memcpy_team> team,
                std::source_location where = std::source_location::current());
  //! Waits (blocking) for the copies in flight and for the callbacks being made. May run inside one of its own `done`
  //! calls (a copy's keep-alive holding the last reference to the runtime), on the completion poller's thread (host
  //! to device) or on a copy thread (device to host: that thread is let go, not joined).
  ~staged_copier();
  staged_copier(const staged_copier&) = delete;
  staged_copier& operator=(const staged_copier&) = delete;

  //! Host to device on `s`, asynchronously: returns at once (the chunks that got a slot are being copied into the
  //! ring); reports to `cb`. `src` must stay valid, and `cb` alive, until `cb->done`. Chunks are enqueued on `s` as
  //! ring slots free up: work enqueued on `s` before `cb->enqueued` may run before some of them.
  //! @throws cuda_error (bad sizes, as for `cuasync::copy_async`; a failed `cuStreamGetId`), std::bad_alloc (nothing
  //! started then)
  void start_to_device(stream_ref s, device_span dst, std::span<const std::byte> src, staged_copy_callback* cb,
                       std::source_location where = std::source_location::current());
  //! Device to host on `s`, asynchronously (as above): the DMAs of the chunks that get a slot now are enqueued in
  //! the call, in stream order; the rest as ring slots free up. @throws cuda_error, std::bad_alloc
  void start_to_host(stream_ref s, std::span<std::byte> dst, device_span src, staged_copy_callback* cb,
                     std::source_location where = std::source_location::current());

  //! Host to device, in stream order on `s`. Blocks (sleeping) until every chunk's DMA is enqueued: when it returns,
  //! `src` may be reused and later work on `s` is ordered after the copy. @throws cuda_error
  void copy_to_device(stream_ref s, device_span dst, std::span<const std::byte> src,
                      std::source_location where = std::source_location::current());
  //! Device to host, in stream order on `s`. Blocks (sleeping) until `dst` holds the data (the work before it on `s`
  //! is waited for, like the driver's pageable copy). @throws cuda_error (including device errors)
  void copy_to_host(stream_ref s, std::span<std::byte> dst, device_span src,
                    std::source_location where = std::source_location::current());

  const staged_copy_options& options() const noexcept { return options_; }
  //! The copy threads (for callers that stage whole copies themselves: the C ABI).
  memcpy_team& team() noexcept { return *team_; }
  //! The store kind chosen so far for copies of `bytes` (for callers that stage whole copies themselves).
  bool streaming_stores(bool to_device, std::size_t bytes) const noexcept {
    return (to_device ? h2d_stores_ : d2h_stores_).streaming(bytes);
  }
  context_ref context() const noexcept { return ctx_; }

 private:
  struct job;
  struct slot;
  void start(std::unique_ptr<job> j);
  // Starts what the free slots allow (under mutex_); collects the callbacks to make outside the lock.
  struct outcalls;
  void pump_locked(outcalls& out);
  job* next_taker_locked();  // the copy that gets the next free slot; null: none may take one
  // A free slot for a chunk of `j`: a free half, or a block's lower half with the upper free too for a whole chunk.
  slot* free_slot_for_locked(const job& j);
  // Half a block, in whole pages; and the chunk size of a copy of `n` bytes (half_chunks_below).
  std::size_t half_chunk_bytes() const noexcept;
  std::size_t chunk_bytes_for(std::size_t n) const noexcept;
  void fail_locked(job& j, std::error_code ec, outcalls& out);  // a failure outside any chunk (asking the stream)
  void start_chunk_locked(job& j, slot& sl, outcalls& out);
  void enqueue_dma_locked(job& j, slot& sl, outcalls& out);  // a filled (H2D) or free (D2H) slot's DMA
  // A chunk's host side on the copy threads, its stores chosen (and, while choosing, timed) by size class.
  void host_copy(const job& j, std::byte* dst, const std::byte* src, std::size_t len, std::function<void()> then);
  void on_filled(slot& sl);                                  // team thread: H2D chunk in the ring
  void on_dma_done(slot& sl, std::error_code ec);            // poller thread: the slot's DMA completed
  void on_drained(slot& sl);                                 // team thread: D2H chunk out of the ring
  void chunk_finished_locked(job& j, slot& sl, std::error_code ec, outcalls& out);
  void report_done_locked(job& j, outcalls& out);  // `done`, once every chunk has finished (after `enqueued`)
  void reap_locked(outcalls& out);  // takes finished jobs out of jobs_
  void run(outcalls& out) noexcept;
  void grow_on_background(std::source_location where) noexcept;  // the ring's allocation (running_ counts it)
  void grow_ring(std::source_location where) noexcept;           // background thread

  enum class ring_state { growing, ready, failed };

  context_ref ctx_;
  staged_copy_options options_;
  std::shared_ptr<event_pool> events_;
  std::vector<pinned_buffer> ring_;  // a block per two slots (its halves), made in order (slots without one wait)
  std::vector<std::unique_ptr<slot>> slots_;
  std::shared_ptr<memcpy_team> team_;
  store_chooser h2d_stores_, d2h_stores_;
  std::mutex mutex_;
  std::condition_variable idle_cv_;
  // Under mutex_, as ring_ and the slots' memory: growing until the first block, ready from then on.
  ring_state ring_state_ = ring_state::growing;
  std::error_code ring_error_;
  std::exception_ptr ring_error_detail_;
  std::deque<std::unique_ptr<job>> jobs_;  // in arrival order (which orders copies on one stream); leave when done
  // Threads making callbacks outside the lock (run()): a finished job has left jobs_ by then, and its `done` call may
  // release the last reference to the copier's owner.
  std::size_t running_ = 0;
};

}  // namespace cuasync::runtime
