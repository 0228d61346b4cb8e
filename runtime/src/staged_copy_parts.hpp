// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the staged copier's state, shared by its two rooms: staged_copy.cpp (the ring's life, starting copies,
// making callbacks outside the lock) and staged_copy_schedule.cpp (which copy gets a free slot, each chunk's steps).
#include <cuasync/runtime/staged_copy.hpp>

#include <cuasync/engine/completion_callbacks.hpp>

#include <algorithm>
#include <vector>

namespace cuasync::runtime {

// How a copy of `n` bytes is cut into chunks of up to `c`: from 4 c on, ramped (c/8, c/4, c/2, c, ..., c, c/2, c/4,
// c/8), so that the first DMA starts after an eighth of a chunk's host copy rather than a whole one, and the last
// ends an eighth of a chunk after the host side (the pipeline's fill and drain, not overlapped with anything, were a
// chunk each: ~0.3 of 1.4 ms at 64 MiB with 8 MiB chunks). Smaller copies: chunks of c.
struct chunk_layout {
  std::size_t n = 0, c = 0;
  bool ramp = true;  // staged_copy_options::ramp
  bool ramped() const noexcept { return ramp && n >= 4 * c; }
  std::size_t head() const noexcept { return c / 8 + c / 4 + c / 2; }  // the ramp's bytes at each end
  std::size_t middle() const noexcept { return n - 2 * head(); }
  std::size_t middle_count() const noexcept { return (middle() + c - 1) / c; }
  std::size_t count() const noexcept { return ramped() ? 6 + middle_count() : (n + c - 1) / c; }
  std::size_t offset(std::size_t k) const noexcept {
    if (!ramped()) return k * c;
    if (k < 3) return (k > 0 ? c / 8 : 0) + (k > 1 ? c / 4 : 0);
    const std::size_t m = middle_count();
    if (k < 3 + m) return head() + (k - 3) * c;
    const std::size_t j = k - 3 - m;
    return head() + middle() + (j > 0 ? c / 2 : 0) + (j > 1 ? c / 4 : 0);
  }
  std::size_t length(std::size_t k) const noexcept {
    if (!ramped()) return std::min(c, n - k * c);
    if (k < 3) return (c / 8) << k;
    const std::size_t m = middle_count();
    if (k < 3 + m) return std::min(c, middle() - (k - 3) * c);
    return (c / 2) >> (k - 3 - m);
  }
};

// One copy: its chunks go through the ring in turn.
struct staged_copier::job {
  bool to_device;
  stream_ref s;
  std::uint64_t stream_key;  // its stream's id (never reused, unlike the handle a later stream may get)
  std::byte* host;
  CUdeviceptr dev;
  std::size_t n;
  staged_copy_callback* cb;
  chunk_layout layout;        // where its chunks begin and end
  std::size_t total;          // chunks (layout.count())
  bool whole_chunks;          // its chunks take a whole block (both halves); else half a block each
  std::size_t started = 0;    // chunks given a slot (H2D: fill submitted; D2H: DMA enqueued)
  std::size_t dmas = 0;       // chunk DMAs enqueued
  std::size_t dmas_done = 0;  // chunk DMAs completed
  std::size_t finished = 0;   // chunks whose slot is free again
  std::size_t in_flight = 0;  // chunks holding a slot
  std::error_code error{};    // the first error; no chunk is started after it
  std::source_location where;  // the caller's, for the errors of chunks enqueued later
  bool reported_enqueued = false;  // `enqueued` is decided (a thread is about to call it)
  bool enqueued_called = false;    // ... and has returned: `done` may follow
  bool reported_done = false;
  std::exception_ptr error_detail{};  // the error's description, when a call failed (not for a failed DMA)
  bool asked = false;      // its stream was asked whether it is busy (once, at the first slot)
  bool throttled = false;  // it was: one slot until a DMA of this copy has completed
  bool stopped() const noexcept { return error || started == total; }
  // No DMA of this copy is still to come: a later copy on its stream may take slots.
  bool all_enqueued() const noexcept { return error || dmas == total; }
  // Some DMA of this copy is still to complete on its stream: the stream is busy with it (not only with others' work).
  bool dmas_pending() const noexcept { return !error && dmas_done < total; }
};

// A ring slot (half a block), and the engine wait on its DMA's event. A chunk of a copy with whole chunks is in the
// block's lower half and holds the upper one too (`whole`): the block is contiguous.
struct staged_copier::slot final : completion_callback {
  staged_copier* owner = nullptr;
  std::byte* mem = nullptr;
  slot* partner = nullptr;  // the other half of its block (slots_[2 i] is a block's lower half, 2 i + 1 its upper)
  bool whole = false;       // a whole chunk is here (a lower half): `partner` is held for it
  job* j = nullptr;  // null: free (an upper half held for a whole chunk: that chunk's job)
  std::size_t chunk = 0, len = 0;
  void complete(std::error_code ec) noexcept override { owner->on_dma_done(*this, ec); }
};

// Callbacks decided under the lock, made after it.
struct staged_copier::outcalls {
  std::vector<job*> enqueued;  // jobs stay (not reaped) until their `enqueued` call has returned
  struct done_call {
    staged_copy_callback* cb;
    std::error_code ec;
    std::exception_ptr detail;
  };
  std::vector<done_call> done;
  std::vector<std::unique_ptr<job>> finished_jobs;
};

}  // namespace cuasync::runtime
