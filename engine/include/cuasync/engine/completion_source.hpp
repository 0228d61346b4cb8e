// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `completion_source`: what the completion service polls. The scheduling core (per-queue FIFOs, head-only
//! passes, adaptive waiting, cancellation, exactly-once completion) knows nothing of CUDA: it asks a source about
//! opaque tokens. `cuda_completion_source` answers with `cuEventQuery` on pooled events; `host_completion_source`
//! is completed by host code (tests, host-side work).

#include <cstdint>
#include <span>
#include <system_error>

namespace cuasync {

//! What a query found.
enum class poll_status : std::uint8_t {
  pending,  //!< not done yet
  ready,    //!< done, successfully
  failed,   //!< done with `poll_result::error`
};

//! How far a failure reaches.
enum class failure_scope : std::uint8_t {
  operation,  //!< only this token's operation fails
  group,      //!< every pending operation of the token's group fails (a sticky context error fails the context)
};

//! A query's answer.
struct poll_result {
  poll_status status = poll_status::pending;
  std::error_code error;  //!< set when `status == failed`
  failure_scope scope = failure_scope::operation;
};

//! The interface the completion service polls. Implementations are thread-safe: `query` and `release` are called
//! from the poller thread (or an I/O executor in in-executor mode) while other threads create tokens.
class completion_source {
 public:
  virtual ~completion_source() = default;
  //! The token's state. Never throws. Called once a token has become ready at most once (a completed CUDA event
  //! costs ~1.4 µs per query): the service drops the token after a non-pending answer.
  virtual poll_result query(std::uintptr_t token) noexcept = 0;
  //! The service is done with `token` (it completed or failed; after a cancellation, only once it completed).
  //! Never throws.
  virtual void release(std::uintptr_t token) noexcept = 0;
  //! Releases several tokens at once (a pass that completed many): a source may do per-batch work once.
  virtual void release_many(std::span<const std::uintptr_t> tokens) noexcept {
    for (std::uintptr_t t : tokens) release(t);
  }
  //! For an ordered queue (`wait_target::order`): whether a failed token means that every token before it failed too
  //! (events of one stream: a fault fails what is still pending). False: earlier tokens may have completed (a replay
  //! anchor's generations reached before the replay that faulted), so a pass asks each of them from the head.
  virtual bool failures_in_order() const noexcept { return true; }
};

namespace detail {
//! While a completion pass queries sources on this thread, its time (completion_queues::now_ns()); 0 otherwise. A
//! source may skip a costly check it made lately for the same token: the CUDA source asks the event of a wait whose
//! host word is still to come only every so often (cuda_completion_source.cpp), not in every pass.
inline thread_local long long pass_now_ns = 0;
}  // namespace detail

}  // namespace cuasync
