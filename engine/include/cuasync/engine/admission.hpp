// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Admission: bounds on the awaited operations in flight, so that enqueueing one never blocks the calling thread.
//!
//! The driver accepts a bounded amount of work on a hardware queue ("connection"): measured on the H200 with driver
//! 580 (bench/async_io/queue_depth_probe.cpp), 1,021 launches or copies per connection, shared by the streams mapped
//! to it (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default); a stream write-value counts as one more, event records and
//! waits count nothing. Past that, `cuLaunchKernelEx` or `cuMemcpyAsync` waits on the host until the GPU drains — a
//! blocked io thread, for as long as the kernel ahead runs. Which connection a stream uses is not visible, so the
//! per-context bound is what one connection holds whatever the mapping.
//!
//! An awaited operation (async_launch, async_copy) takes a place before it enqueues anything: at once when its stream
//! and its context have room and nobody waits before it on that stream; otherwise it waits, asynchronously, in its
//! stream's FIFO, and is admitted (its work enqueued) when an earlier operation of the context completes. Places are
//! given back when the operation's work is done. Operations of one stream are admitted in the order they arrived;
//! streams are served in turn. Work enqueued directly on a stream (not through an awaited operation) is not bounded
//! and does not wait for those waiting for admission.
//!
//! An operation may hold its stream (an awaited pageable copy, which enqueues its chunks over time): later awaited
//! operations on that stream wait until it lets go, so stream order is the order of the calls.

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace cuasync {

class event_pool;

//! Bounds, per context. 0 means no bound.
struct admission_limits {
  //! Awaited operations in flight on one stream: leaves room on its connection for other streams' work.
  std::uint32_t per_stream = 64;
  //! Awaited operations in flight on the context. Each enqueues at most two items (its work and a host word), so 500
  //! keep any one connection below its 1,021 whatever the stream-to-connection mapping.
  std::uint32_t per_context = 500;
};

//! Where a stream's places are counted: its context's pool and the stream's key (cuda_completion_source::site_of).
struct admission_site {
  std::shared_ptr<event_pool> pool;
  std::uint64_t stream_key = 0;
  CUstream stream = nullptr;  //!< the stream's handle: `record(s, ticket)` checks that `s` is it
};

//! A place for one operation on a stream (or, from `try_admit_n`, a credit of several places for operations that give
//! them back together). Move-only; gives its places back when destroyed, unless a recorded wait took a one-place
//! ticket over (then the place is given back when that wait's event completes).
class admission_ticket {
 public:
  admission_ticket() = default;
  admission_ticket(admission_ticket&& o) noexcept
      : pool_(std::move(o.pool_)),
        stream_key_(o.stream_key_),
        stream_(o.stream_),
        count_(o.count_),
        hold_(std::exchange(o.hold_, false)),
        granted_(std::exchange(o.granted_, false)) {}
  admission_ticket& operator=(admission_ticket&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::move(o.pool_);
      stream_key_ = o.stream_key_;
      stream_ = o.stream_;
      count_ = o.count_;
      hold_ = std::exchange(o.hold_, false);
      granted_ = std::exchange(o.granted_, false);
    }
    return *this;
  }
  admission_ticket(const admission_ticket&) = delete;
  admission_ticket& operator=(const admission_ticket&) = delete;
  ~admission_ticket() { reset(); }

  explicit operator bool() const noexcept { return pool_ != nullptr; }
  //! The id (`cuStreamGetId`) of the stream the place is on.
  std::uint64_t stream_key() const noexcept { return stream_key_; }
  //! The places it holds: 1, or a credit's count (0 when empty).
  std::uint32_t count() const noexcept { return pool_ ? count_ : 0; }
  //! Takes `n` of a credit's places (0 < n < count()) into a ticket of their own, on the same stream.
  admission_ticket split(std::uint32_t n);
  //! Adds the places of `o`, a credit taken on the same stream (o is left empty). Never throws.
  void absorb(admission_ticket&& o) noexcept;
  //! Operations wait for admission in its stream's context: a credit's unused places must not be used past them
  //! (give them back). One atomic load. Never throws.
  bool others_waiting() const noexcept;
  //! The operation no longer holds its stream: later operations on it may be admitted. Never throws.
  void end_hold() noexcept;
  //! Gives the places back now. Never throws.
  void reset() noexcept;

 private:
  friend class cuda_completion_source;
  admission_ticket(std::shared_ptr<event_pool> pool, std::uint64_t stream_key, CUstream stream, bool hold) noexcept
      : pool_(std::move(pool)), stream_key_(stream_key), stream_(stream), hold_(hold) {}
  std::shared_ptr<event_pool> pool_;  // the context's admission state lives in its event pool
  std::uint64_t stream_key_ = 0;
  CUstream stream_ = nullptr;  // the handle of the stream admitted on: a free check that record() is given that one
  std::uint32_t count_ = 1;    // places held: more than 1 only for a credit (try_admit_n), which never holds or is granted
  bool hold_ = false;
  // Granted to a waiter and its work not enqueued yet: until it is (its record) or the place is given back, no
  // operation may take the stream's fast path past it (stream_state::granted).
  bool granted_ = false;
};

//! An operation waiting for admission. Derive from it; it must stay alive until `admitted` is called or a cancel
//! succeeds.
class admission_waiter {
 public:
  //! Called once, with the reserved place, on a thread that made room (one that saw an earlier operation complete):
  //! enqueue the work there, without blocking. Must not throw. Waiters are called in the order their places were
  //! granted (a stream's in arrival order), one thread at a time.
  virtual void admitted(admission_ticket ticket) noexcept = 0;

 protected:
  ~admission_waiter() = default;

 private:
  friend class cuda_completion_source;
  std::shared_ptr<event_pool> pool_;  // set while queued
  std::uint64_t stream_key_ = 0;
  CUstream stream_ = nullptr;
  bool hold_ = false;
};

}  // namespace cuasync
