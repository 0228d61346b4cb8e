// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the fault domain behind communicators made together — their NCCL handles, devices and contexts, and
// the first fault, which aborts them all on a thread of its own (ncclCommAbort can take a while; the poller thread
// that notices the fault must not wait for it).
#include <cuasync/collectives/collective_completion.hpp>
#include <cuasync/collectives/communicator.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <atomic>
#include <mutex>
#include <span>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::collectives::detail {

struct clique_member {
  nccl_comm comm = nullptr;
  int rank = 0;
  int device = 0;
  primary_context context;
  std::shared_ptr<event_pool> events;  // the context's pool, looked up once
};

struct clique {
  std::vector<clique_member> members;
  int nranks = 0;
  communicator_options options;

  //! True once a fault was recorded (then `error` and `detail` are set and no longer change).
  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  //! Records the first fault and starts aborting every member; later faults are ignored. Never throws. Inside an
  //! open group of this thread that holds the domain, the abort waits for the group's end (NCCL still holds the
  //! group's queued calls on the communicators: `end_group` starts it after ncclGroupEnd).
  void fail(std::error_code ec, std::string what) noexcept;
  std::error_code error() const noexcept;
  std::string detail() const;
  //! Checks every member's `ncclCommGetAsyncError`; a fault is recorded (and the domain aborted). Never throws.
  bool poll_async_errors() noexcept;
  //! "rank 1 of 2 on device 1".
  std::string describe(int index) const;

  //! Held shared around a call into NCCL that uses the communicators (not needed by a thread whose open group
  //! holds the domain): an abort, which frees them, waits for the call to return.
  std::shared_lock<std::shared_mutex> hold_comms() { return std::shared_lock(comms_mutex_); }
  //! Starts the abort that `fail` deferred to the end of this thread's group (no-op when none was).
  void start_deferred_abort() noexcept;

  clique() = default;
  clique(const clique&) = delete;
  clique& operator=(const clique&) = delete;
  ~clique();  // waits for the abort, or destroys the communicators

 private:
  void start_abort() noexcept;

  std::atomic<bool> failed_{false};
  // Held shared while NCCL is asked about the communicators, exclusively while they are aborted (ncclCommAbort
  // frees them: no poll may be inside NCCL with them then).
  std::shared_mutex comms_mutex_;
  mutable std::mutex mutex_;
  std::error_code error_;
  std::string detail_;
  std::thread aborter_;
  // Set by the thread that recorded the fault inside its group, cleared by that thread's group end.
  bool abort_deferred_ = false;
};

//! Makes an empty fault domain. Its last reference dropped while `teardown_elsewhere` is alive on that thread (the
//! poller's release of a wait) is destroyed on a disposal thread: ~clique waits for NCCL (the abort, or
//! ncclCommFinalize/Destroy) and releases primary contexts, which must not hold up every completion of the process.
std::shared_ptr<clique> make_clique();

//! Marks this thread's scope as one where a fault domain's teardown must not run (see make_clique).
class teardown_elsewhere {
 public:
  teardown_elsewhere() noexcept;
  ~teardown_elsewhere();
  teardown_elsewhere(const teardown_elsewhere&) = delete;
  teardown_elsewhere& operator=(const teardown_elsewhere&) = delete;

 private:
  bool saved_;
};

//! Inside an open `group`, notes that `c` has calls in it, before the call: the domain is held (`hold_comms`) until
//! the outermost group ends, since NCCL keeps the queued calls until then, and a failed `ncclGroupEnd` aborts every
//! domain noted (the ranks whose part was issued would otherwise wait for the others forever).
void note_grouped(const std::shared_ptr<clique>& c);
//! True when this thread's open group holds `c`.
bool held_by_this_group(const clique& c) noexcept;
//! Takes the domains noted in this thread's groups (cleared), releasing them: aborts may proceed.
std::vector<std::shared_ptr<clique>> take_grouped() noexcept;

//! A stable string for an operation's name on a rank ("ncclAllReduce on rank 1 of 2 on device 1"): the api name the
//! completion's exception carries. Interned for the process (a handful per communicator shape).
const char* operation_label(const char* op, const clique& c, int index);
//! The same for one wait on several ranks' parts: "collective on rank 0 of 2 on device 0 + rank 1 of 2 on device 1".
const char* parts_label(std::span<const rank_part> parts);

}  // namespace cuasync::collectives::detail
