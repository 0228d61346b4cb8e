// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `stream_gate`: how a pageable copy returns before its host copy is done, keeping stream order. The call enqueues,
//! on the caller's stream, a wait on a pinned host word (`cuStreamWaitValue32`, GEQ the copy's number), then the
//! DMA out of (or into) pinned memory, in call order with the stream's other work; the copy threads fill the memory
//! afterwards and store the copy's number into the word, which lets the stream go on. What releases the stream is
//! host work only (never GPU work enqueued later, which could sit behind the wait on a shared hardware queue).
//! Numbers are released in order: a copy filled before an earlier one waits for it, so the word never passes a copy
//! whose memory is still being filled. One gate per stream (the C ABI's stream objects hold one).
#include <cuasync/driver/stream.hpp>
#include <cuasync/runtime/pinned_pool.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

namespace cuasync::runtime {

class stream_gate {
 public:
  //! Gives the gate its word: a block from `pool` (4 KiB), taken without allocating here; on a miss one is allocated
  //! on cuasync's background thread for a later copy, and this answers false. False also once the device has said
  //! it has no stream memory operations. Thread-safe, never throws.
  bool ready(const std::shared_ptr<pinned_pool>& pool) noexcept;
  //! Enqueues the wait of the next copy on `s` and answers its number (under the gate's lock, so numbers follow
  //! call order); 0 when the device has no stream memory operations (nothing enqueued: copy another way).
  //! @throws cuda_error (nothing enqueued then)
  std::uint32_t enqueue_wait(stream_ref s);
  //! Copy `n`'s block is filled (or will never be: its stream must go on anyway). From any thread. Never throws.
  void release(std::uint32_t n) noexcept;
  //! The word's last use is the stream's work so far: it goes back to the pool only after that.
  void retire(stream_ref s) noexcept;

 private:
  std::mutex mutex_;
  pinned_block word_;
  CUdeviceptr word_device_ = 0;
  bool requested_ = false;   // a block is being allocated for the word
  bool unsupported_ = false;  // cuStreamWaitValue32 answered CUDA_ERROR_NOT_SUPPORTED
  std::uint32_t issued_ = 0;     // the last copy number waited for
  std::uint32_t released_ = 0;   // the word's value: every copy up to it is filled
  std::set<std::uint32_t> early_;  // filled before an earlier copy
};

}  // namespace cuasync::runtime
