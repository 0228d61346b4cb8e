// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `completion_callbacks`: the engine's own front-end. A callback object is called when its token is done,
//! on the poller thread (or on a thread that calls `poll_once`). It serves the work inside cuasync that must learn of
//! GPU completion without an Asio executor and without blocking a thread: staged-copy chunks, waits of the synchronous
//! APIs, and (once it exists) the C ABI.
//!
//! Callbacks run on the poller thread between its passes: they must be short and must never wait for the GPU (hand
//! longer work to another thread). A callback that throws terminates (it is `noexcept`).

#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/poller.hpp>

#include <memory>

namespace cuasync {

//! A wait with a callback. Derive from it; it must stay alive (and unmoved) until `complete` is called, exactly once:
//! with an empty code when the token is done, the source's error when it failed, `operation_canceled` when cancelled.
class completion_callback : public queued_wait {
 public:
  virtual void complete(std::error_code ec) noexcept = 0;

 protected:
  ~completion_callback() = default;
};

//! Callback waits, polled by the poller thread. Thread-safe.
class completion_callbacks final : public poll_client, public std::enable_shared_from_this<completion_callbacks> {
 public:
  //! The process's instance (never destroyed).
  static completion_callbacks& instance();
  //! A separate instance with its own policy (tests, the C ABI's hosts). Call `shut_down` before dropping it.
  static std::shared_ptr<completion_callbacks> create(poll_policy policy = poll_policy::from_environment());

  //! Calls `cb->complete(...)` once `t`'s token is done. Never calls it inside this call. After `shut_down` the
  //! callback completes at once, on this thread, with `operation_canceled`. @throws std::bad_alloc (nothing started)
  void wait(wait_target t, completion_callback* cb);
  //! Cancels `cb`'s wait: completes it with `operation_canceled` on this thread unless it was already completed (or
  //! is being completed) by a pass; returns whether it did. The token stays polled until done.
  bool cancel(completion_callback* cb) noexcept;
  //! Runs one pass on this thread and calls the callbacks it completed; returns how many.
  std::size_t poll_once();
  //! `poll_once`, only when no other pass is running (the poller thread's, another caller's): never waits for one.
  std::size_t try_poll_once();
  //! Completes every pending callback with `operation_canceled` and refuses new waits; tokens still running stay
  //! polled by the poller thread until done.
  void shut_down();

  void set_policy(const poll_policy& p) { queues_.set_policy(p); }
  completion_statistics stats() const { return queues_.stats(); }

  std::optional<std::chrono::nanoseconds> poller_pass() override;
  bool polled_by_thread() const override { return true; }
  bool finished() const override { return queues_.is_shut_down() && queues_.empty(); }

 private:
  explicit completion_callbacks(poll_policy policy) : queues_(policy) {}
  std::size_t run_pass(bool full, bool if_free = false);  // if_free: only when no other pass runs
  completion_queues queues_;
  std::atomic<bool> registered_{false};
};

}  // namespace cuasync
