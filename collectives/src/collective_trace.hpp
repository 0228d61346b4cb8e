// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: collectives on the timeline (trace/hooks.hpp). Each NCCL call is a `collective` span on its stream's lane,
// between two timing events, and its issue a span on the calling thread's lane. Inside a group NCCL launches the
// work at the outermost ncclGroupEnd, so the span's end is recorded there, and the group's calls on one stream are
// one span ("ncclSend + ncclRecv (rank 0 of 2 on device 0)"). Off, a call pays one load and a branch.
#include <cuasync/collectives/communicator.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/hooks.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace cuasync::collectives::detail {

class traced_collective {
 public:
  //! Before the NCCL call of `c`'s rank on `s`.
  traced_collective(const communicator& c, stream_ref s, const char* nccl_api, std::uint64_t bytes) noexcept {
    if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]] start(hooks, c, s, nccl_api, bytes);
  }
  //! NCCL accepted the call: outside a group its work is on the stream now; inside one, at the group's end. A call
  //! NCCL refused (no `issued()`) records no GPU span.
  void issued(bool in_group) noexcept {
    if (op_) [[unlikely]] finish(in_group);
  }
  ~traced_collective();
  traced_collective(const traced_collective&) = delete;
  traced_collective& operator=(const traced_collective&) = delete;

 private:
  void start(std::uint32_t hooks, const communicator& c, stream_ref s, const char* nccl_api,
             std::uint64_t bytes) noexcept;
  void finish(bool in_group) noexcept;

  std::unique_ptr<cuasync::detail::instrumented_op> op_;
  stream_ref stream_;
  const char* api_ = "";
  std::uint64_t bytes_ = 0;
  std::string who_;
};

//! The outermost group ended: its calls' spans end now when NCCL launched them (`launched`), else they are dropped.
//! Never throws.
void end_grouped_traces(bool launched) noexcept;

}  // namespace cuasync::collectives::detail
