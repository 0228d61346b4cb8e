// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: a completion queue of the C ABI — records for an eventfd-watching host, and/or a thread of its own that
// runs C callbacks — and how an operation's completion reaches it.
#include "abi.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace cuasync::c_api {

class completion_queue : public std::enable_shared_from_this<completion_queue> {
 public:
  //! `flags`: cuasync_queue_flags. @throws abi_error, std::system_error (no eventfd)
  static std::shared_ptr<completion_queue> create(std::uint32_t flags);
  ~completion_queue();
  completion_queue(const completion_queue&) = delete;
  completion_queue& operator=(const completion_queue&) = delete;

  bool has_fd() const noexcept { return fd_ >= 0; }
  bool has_callbacks() const noexcept { return callbacks_; }
  //! The eventfd, readable from now on while records are queued. Until it is first asked for, nobody can be waiting
  //! on it: deliveries and drains make no eventfd syscalls (a consumer that drains by polling pays none).
  int hand_out_fd();
  //! From any thread; never runs user code here and never blocks on it. Dropped after close().
  void deliver(const cuasync_completion_record& r, cuasync_callback cb, void* user_data) noexcept;
  //! Takes up to `capacity` records, oldest first; the fd turns unreadable in the drain that returns fewer than
  //! `capacity` (the one that finds the queue empty).
  std::size_t drain(cuasync_completion_record* out, std::size_t capacity);
  //! Drops what is queued, stops the callback thread (waiting for a running callback, unless called from it).
  void close() noexcept;
  //! While alive, this thread is about to drain `q` (queue_poll: its own pass, then the drain): deliveries this
  //! thread makes to `q` meanwhile skip the eventfd's write (a syscall between the completion and the consumer that
  //! takes it), and the drain makes the fd readable for what it leaves queued.
  class draining_here {
   public:
    explicit draining_here(const completion_queue* q) noexcept;
    ~draining_here();
    draining_here(const draining_here&) = delete;
    draining_here& operator=(const draining_here&) = delete;

   private:
    const completion_queue* previous_;
  };

 private:
  explicit completion_queue(std::uint32_t flags);
  void run_callbacks();
  struct pending_callback {
    cuasync_completion_record record;
    cuasync_callback cb;
    void* user_data;
  };
  int fd_ = -1;
  bool callbacks_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<cuasync_completion_record> records_;
  // The eventfd holds a count, or is about to (a write in flight): set by the delivery that finds the queue's fd
  // clear (or by a drain that leaves records a delivery of its own thread queued unannounced: draining_here),
  // cleared by the drain that returns fewer records than asked for. Both eventfd syscalls are kept off the
  // path from a completion to the consumer that sees it: the write happens after the lock is let go, and a drain
  // that returns as many as asked for leaves the read to the next drain (the protocol's re-check), so a closed loop
  // (drain one, launch the next) pays neither while it waits.
  bool readable_ = false;
  bool fd_handed_out_ = false;
  std::atomic<int> writes_in_flight_{0};
  // records_.size(), and whether the fd is readable with nothing queued (left for the next drain), written under the
  // lock: an empty drain returns without the lock, so that a consumer spinning on drain never makes the delivering
  // thread wait for the lock (measured: a few µs a completion, in a VM).
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> fd_left_readable_{false};
  std::deque<pending_callback> pending_;
  bool closed_ = false;
  std::thread thread_;
};

//! Where one operation's completion goes (validated against the queue's flags when made).
struct delivery {
  std::shared_ptr<completion_queue> queue;  // null: nothing to report
  cuasync_completion_record record{};
  cuasync_callback cb = nullptr;
  void* user_data = nullptr;
  //! Reports `ec` (success, a CUDA error, a cancellation) once. Never throws.
  void operator()(std::error_code ec) noexcept;
  explicit operator bool() const noexcept { return static_cast<bool>(queue); }
};
//! The delivery for a caller's `cuasync_completion`. @throws abi_error (stale queue, a callback on a queue without
//! callbacks, a token for a queue without an fd)
delivery make_delivery(const cuasync_completion& c, const char* what);

//! The error_category of cuasync_error_code values carried by std::error_code (host tokens).
const std::error_category& abi_category() noexcept;

}  // namespace cuasync::c_api
