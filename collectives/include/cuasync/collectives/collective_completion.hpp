// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Completion of collectives through the completion engine. A wait is a pooled event recorded on the stream
//! after the collective; while it is pending, each poll also asks NCCL for the fault domain's asynchronous errors
//! (`ncclCommGetAsyncError`, a read of a flag). A fault — NCCL's error, a device error in the event, or the
//! communicator's timeout — aborts every communicator of the domain (`ncclCommAbort`, so ranks spinning in a kernel
//! for a dead peer exit) and fails every waiter of the domain at once (the engine's group failure), with the error
//! code (nccl_category, cu_category, or `std::errc::timed_out`). `communicator::fault_detail()` says which rank saw it.
//! Boost-free: async_collectives.hpp turns these waits into Asio completions, the engine's callbacks take them too.

#include <cuasync/collectives/communicator.hpp>
#include <cuasync/engine/completion_queues.hpp>

#include <cuasync/driver/stream.hpp>

#include <memory>
#include <source_location>
#include <span>

namespace cuasync::collectives {

//! One rank's part of a collective this process issued: its communicator and the stream its part went on.
struct rank_part {
  const communicator& comm;
  stream_ref stream;
};

//! The process's completion source for collectives. Thread-safe.
class collective_completion_source final : public completion_source {
 public:
  static collective_completion_source& instance();

  //! A wait for everything enqueued on `s` so far (the collectives just issued on it, after their group ended),
  //! failing with `c`'s fault domain. `keep_alive` is held until the event is done or the domain fails.
  //! @throws cuda_error (the record failed), collective_error (the communicator was aborted)
  wait_target record(const communicator& c, stream_ref s, std::shared_ptr<void> keep_alive = nullptr,
                     std::source_location where = std::source_location::current());
  //! One wait for several ranks' parts (one process driving several GPUs, after their `group` ended): ready once
  //! every part is, so the waiter wakes once rather than once per rank. The parts must share one fault domain.
  //! @throws cuda_error (no parts, an empty communicator, two fault domains, a failed record), collective_error
  wait_target record(std::span<const rank_part> parts, std::shared_ptr<void> keep_alive = nullptr,
                     std::source_location where = std::source_location::current());

  poll_result query(std::uintptr_t token) noexcept override;
  void release(std::uintptr_t token) noexcept override;

 private:
  collective_completion_source() = default;
};

}  // namespace cuasync::collectives
