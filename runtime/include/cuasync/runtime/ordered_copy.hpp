// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! A pageable copy enqueued whole, in stream order, in the call, through a few pinned chunks that it reuses: what a
//! caller that cannot wait and cannot be told "busy" needs when no pinned block of the copy's whole size is idle (a
//! cold C ABI copy). Every chunk's DMA is enqueued in the call, each behind a wait on the stream's gate
//! (`stream_gate`) where its chunk's memory is not ready yet; the copy threads fill (H2D) or drain (D2H) a chunk
//! once the DMA that last used its memory has completed (the completion engine reports it), then release the next
//! wait. What releases the stream is host work only. The calling thread copies nothing and allocates no pinned
//! memory: the chunks are given, taken from a pool without allocating.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/memcpy_team.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/stream_gate.hpp>

#include <cstddef>
#include <memory>
#include <source_location>
#include <system_error>
#include <vector>

namespace cuasync::runtime {

//! What an ordered copy reports, once, on a cuasync thread (the poller or a copy thread): it must not block.
class ordered_copy_callback {
 public:
  //! The data has landed (H2D: on the device; D2H: in host memory) or the copy failed with `ec` (the first error;
  //! the stream was let go on either way). The last call: the callback may be destroyed in it.
  virtual void done(std::error_code ec) noexcept = 0;

 protected:
  ~ordered_copy_callback() = default;
};

//! One ordered copy's parts. `chunks` (≥ 1, all of the first one's size or larger) are the staging memory, used in
//! turn; `gate` is `s`'s, ready (`stream_gate::ready`), and must outlive the copy.
struct ordered_copy_request {
  stream_ref s;
  stream_gate* gate = nullptr;
  bool to_device = true;
  std::byte* host = nullptr;  //!< H2D: read (const in effect); D2H: written
  CUdeviceptr device = 0;
  std::size_t bytes = 0;
  std::vector<pinned_block> chunks;
  memcpy_team* team = nullptr;
  bool streaming_stores = false;  //!< non-temporal stores in the copy threads' host copies
  std::shared_ptr<event_pool> events;
};

//! Enqueues every chunk's wait and DMA on `r.s` and returns; the host side runs on the copy threads, and `cb->done`
//! is called once the data has landed. The host memory must stay valid and unused until then. Cost on this thread:
//! about three driver calls per chunk (a wait where needed, the DMA, an event record), no host copy.
//! False, with nothing enqueued and `cb` never called, when the device has no stream memory operations (H2D: the
//! first wait says so; D2H, where the first chunks need no wait, that copy fails through `cb` instead).
//! @throws cuda_error, std::bad_alloc when nothing was enqueued (then `cb` is never called); a failure after the
//! first chunk is reported through `cb` instead (the stream is let go on).
[[nodiscard]] bool start_ordered_copy(ordered_copy_request r, ordered_copy_callback* cb,
                        std::source_location where = std::source_location::current());

}  // namespace cuasync::runtime
