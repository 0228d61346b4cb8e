// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The process's one poller thread. It runs poll passes for every front-end that asks it to (an Asio service
//! past its executor window, the engine's callbacks, the C ABI), sleeps between passes as their policies ask, and
//! blocks on a condition variable when nothing is pending (zero CPU when idle). Started on first use, stopped
//! (joined) when its last client leaves. It runs no user code: front-ends hand completions to their own threads.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace cuasync {

//! Something the poller thread polls.
class poll_client {
 public:
  virtual ~poll_client() = default;
  //! One pass on the poller thread; returns the delay wanted before the next one, or nullopt when nothing is pending.
  virtual std::optional<std::chrono::nanoseconds> poller_pass() = 0;
  //! False while the client's own thread polls it (e.g. an I/O executor during its window): the poller skips it.
  virtual bool polled_by_thread() const = 0;
  //! True once the client has shut down and has nothing left pending: the poller lets it go.
  virtual bool finished() const = 0;
};

//! The poller thread. Thread-safe.
class poller {
 public:
  static poller& instance();
  //! Starts polling `c` (and the thread, if it is not running). Adding a client twice polls it twice.
  void add(std::shared_ptr<poll_client> c);
  //! Stops polling `c` now, unless `keep_until_finished` (then it stays until `c->finished()`). The thread stops when
  //! no client is left.
  void remove(const poll_client* c, bool keep_until_finished);
  //! Called after every new wait: wakes the thread if it sleeps or blocks.
  void submitted() noexcept {
    submissions_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
  }
  //! As `submitted`, for work whose completion time is measured rather than awaited (a traced operation's GPU span):
  //! the thread is woken only when it is parked with nothing armed, not out of a timed sleep, which ends by itself
  //! (a futex wake per traced launch while other work was armed cost more than the launch).
  void submitted_unhurried() noexcept {
    submissions_.fetch_add(1, std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_seq_cst)) wake();
  }
  //! How often the thread was woken (for tests).
  std::uint64_t wakeups() const noexcept { return wakeups_.load(std::memory_order_relaxed); }

 private:
  poller() = default;
  void wake();
  void run(std::uint64_t generation);
  //! Spins up to `idle_linger` for a submission after `seen`; true when one came.
  bool linger_for_submission(std::uint64_t seen) const noexcept;
  static constexpr std::chrono::microseconds idle_linger{50};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<poll_client>> clients_;
  std::thread thread_;
  bool running_ = false;
  bool wake_flag_ = false;
  std::uint64_t generation_ = 0, stopped_generation_ = 0;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> parked_{false};  // sleeping without a deadline (nothing armed)
  std::atomic<std::uint64_t> submissions_{0};
  std::atomic<std::uint64_t> wakeups_{0};
};

}  // namespace cuasync
