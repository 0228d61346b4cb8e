// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! How cuasync copies pageable host memory: one policy, by size and by what the caller can do meanwhile, used by
//! the blocking copy (`runtime::copy_blocking`), the awaited copy (`async_copy` in async_io) and the C ABI's
//! non-blocking copy. The mechanisms it picks from:
//! - the driver's own pageable copy (it stages through its buffer on the calling thread; D2H returns only when done);
//! - one pinned block of the copy's whole size, enqueued in stream order in the call (`stream_gate`);
//! - a few pinned chunks reused in turn, every chunk enqueued in the call (`start_ordered_copy`);
//! - the staged copier's shared ring (`staged_copier`), which enqueues chunks as its slots free up.

#include <cstddef>

namespace cuasync::runtime {

//! The thresholds, measured on the H200 (bench/runtime, `bench/results/runtime.md`).
struct pageable_copy_policy {
  //! Blocking copies below this go to the driver: at 4 MiB its own path was as fast as staging (13.2 vs 20.8 GB/s
  //! H2D staged, 12.5 vs 8.0 GB/s D2H: staging loses there), from 64 MiB staging is 3.7-5x faster.
  std::size_t driver_below_bytes = std::size_t{8} << 20;
  //! Non-blocking copies up to this size take one pinned block of their whole size when one is idle (a warm copy:
  //! one wait, one DMA, one event). Larger ones would hold that much pinned memory per copy in flight.
  //! The block of a size is allocated in the background when the size is first seen, by registration
  //! (`allocate_pinned_block`): a `cuMemHostAlloc` kept every other thread's driver calls out for its whole length
  //! (H100: 64-68 ms for 128 MiB; bench/driver's pinned_alloc_interference_probe), and the C ABI's cold copy calls
  //! waited 48-97 ms behind it; registered, 0.6 ms. Without whole blocks (0; `CUASYNC_WHOLE_BLOCK_UP_TO_MIB` sets it)
  //! the copies take the chunks (a copy's call 0.3-0.4 ms H2D, 1.1-1.8 ms D2H) or, with the chunks in use, the ring,
  //! which holds the stream: the next call on it answers BUSY.
  std::size_t whole_block_up_to_bytes = std::size_t{256} << 20;
  //! Non-blocking copies up to this size without an idle whole block (the first of a size) go through up to
  //! `cold_chunks` chunks of `cold_chunk_bytes`, reused in turn, every chunk enqueued in the call (so the stream is
  //! not held: later calls on it follow the copy); a runtime reserves them when it is created (in the background), so
  //! that the first copy finds them. Larger copies take the ring.
  std::size_t chunks_up_to_bytes = std::size_t{256} << 20;
  std::size_t cold_chunk_bytes = std::size_t{2} << 20;
  std::size_t cold_chunks = 4;
  //! Cold copies the reservation serves at once, `cold_chunks` each: a framework's first step copies its inputs
  //! back to back (x, then y, then launches), and a second cold copy without chunks would take the ring, which holds
  //! the stream (the C ABI answers the next call on it BUSY until the ring has enqueued the copy's last chunk).
  std::size_t cold_copies_reserved = 2;
};

//! Where a pageable copy goes.
enum class pageable_route {
  driver,       //!< the driver's pageable copy
  whole_block,  //!< one pinned block of its size, in stream order in the call
  chunks,       //!< a few pinned chunks, every chunk in stream order in the call
  ring,         //!< the staged copier's ring (the stream's later work is ordered after it once it has enqueued)
};

//! What the caller does while the copy runs.
enum class pageable_caller {
  blocking,      //!< waits in the call (copy_blocking)
  awaiting,      //!< awaits the copy's completion before its next operation on the stream (async_copy)
  non_blocking,  //!< returns at once and may enqueue more on the stream before the copy is done (the C ABI)
};

//! What is ready for a non-blocking copy: an idle block of its whole size, idle chunks, the stream's gate word.
struct pageable_resources {
  bool whole_block = false;
  bool chunks = false;
  bool gate = false;  //!< the stream's gate has its word (`stream_gate::ready`)
};

//! The route of a pageable copy of `bytes`. Blocking: the driver below `driver_below_bytes`, else the ring (waited
//! for). Awaiting: the ring (it never blocks and shares its slots fairly between streams; the awaiter waits for the
//! completion anyway). Non-blocking: up to `whole_block_up_to_bytes`, the whole block when `r` has one (H2D: and the
//! gate); else up to `chunks_up_to_bytes`, the chunks (with the gate); else the ring.
constexpr pageable_route choose_pageable_route(const pageable_copy_policy& p, pageable_caller caller,
                                               std::size_t bytes, bool to_device, pageable_resources r = {}) noexcept {
  switch (caller) {
    case pageable_caller::blocking:
      return bytes < p.driver_below_bytes ? pageable_route::driver : pageable_route::ring;
    case pageable_caller::awaiting:
      return pageable_route::ring;
    case pageable_caller::non_blocking:
      break;
  }
  if (bytes <= p.whole_block_up_to_bytes && r.whole_block && (r.gate || !to_device)) return pageable_route::whole_block;
  if (bytes <= p.chunks_up_to_bytes && r.chunks && r.gate) return pageable_route::chunks;
  return pageable_route::ring;
}

}  // namespace cuasync::runtime
