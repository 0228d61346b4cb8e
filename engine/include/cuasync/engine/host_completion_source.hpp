// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `host_completion_source`: a completion source whose tokens host code completes. It drives the completion
//! service without a GPU (the CI tests of the scheduling logic) and bridges host-side work into the same waits.

#include <cuasync/engine/completion_source.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <unordered_map>

namespace cuasync {

//! Tokens that start pending and become ready (or failed) when `complete` is called. Thread-safe.
class host_completion_source final : public completion_source {
 public:
  //! `keep_history`: released tokens stay known (with their query counts) for tests; false forgets them at release,
  //! for a long-lived source (the C ABI's host tokens).
  explicit host_completion_source(bool keep_history = true) : keep_history_(keep_history) {}
  host_completion_source(const host_completion_source&) = delete;
  host_completion_source& operator=(const host_completion_source&) = delete;
  ~host_completion_source() override;

  //! A new pending token (never 0).
  std::uintptr_t create();
  //! Completes `token`: successfully when `error` is empty, otherwise failed with `error` reaching `scope`.
  //! Completing twice keeps the first outcome. Unknown tokens are ignored (the service may already have released
  //! them after a group failure).
  void complete(std::uintptr_t token, std::error_code error = {}, failure_scope scope = failure_scope::operation);

  //! How many times `token` was queried (0 for unknown tokens). For tests of head-only polling.
  std::size_t queries(std::uintptr_t token) const;
  //! Queries of all tokens so far.
  std::size_t total_queries() const;
  //! Tokens created and not yet released by the service.
  std::size_t live_tokens() const;
  //! True while `token` has not been released.
  bool live(std::uintptr_t token) const;

  poll_result query(std::uintptr_t token) noexcept override;
  void release(std::uintptr_t token) noexcept override;

 private:
  struct state {
    poll_result result;
    std::size_t queries = 0;
    bool released = false;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::uintptr_t, state> tokens_;
  std::uintptr_t next_ = 1;
  std::size_t total_queries_ = 0;
  std::size_t live_ = 0;
  bool keep_history_ = true;
};

}  // namespace cuasync
