// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what a stream's events do not cover. A pageable device-to-host copy ends on the host (the copy threads
// copy its pinned block out after the DMA), and a staged copy enqueues its chunks over time, holding the stream until
// the last one is enqueued. So `stream_wait` completes only after the host-side work issued before it; buffers freed
// while a staged copy holds their stream are freed once it lets go (their stream-ordered free then follows its last
// chunk); and event records on a held stream are refused (an event would come before the chunks still to come).
#include "completion_queue.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <system_error>
#include <vector>

namespace cuasync::c_api {

class host_side_work {
 public:
  //! A piece of host-side work starts, in call order with the stream's other calls. `finish` it once, when done.
  //! @throws std::bad_alloc
  std::uint64_t start();
  //! The piece is done: completions that waited only for it and earlier pieces are delivered here. Never throws.
  void finish(std::uint64_t piece) noexcept;
  //! 0 when no host-side work is running (nothing to wait for); else a mark for `deliver_after`, covering every
  //! piece started so far.
  std::uint64_t mark();
  //! Delivers `ec` to `to` once every piece started before `mark` is finished: now, or from the `finish` that ends
  //! the last of them. Never throws.
  void deliver_after(std::uint64_t mark, delivery to, std::error_code ec) noexcept;

  //! A staged copy holds the stream (until its last chunk is enqueued).
  void hold();
  //! It lets go; when no hold is left, what was deferred meanwhile is released (here, outside the lock).
  void let_go() noexcept;
  bool held() const;
  //! Keeps `what` until no staged copy holds the stream; false (and `what` untouched) when none does.
  //! @throws std::bad_alloc
  bool defer_while_held(std::shared_ptr<void>& what);

 private:
  struct parked {
    std::uint64_t mark;
    delivery to;
    std::error_code ec;
  };
  bool covered_locked(std::uint64_t mark) const { return running_.empty() || *running_.begin() >= mark; }

  mutable std::mutex mutex_;
  std::uint64_t next_ = 1;
  std::set<std::uint64_t> running_;
  std::vector<parked> parked_;
  int holds_ = 0;
  std::vector<std::shared_ptr<void>> deferred_;
};

}  // namespace cuasync::c_api
