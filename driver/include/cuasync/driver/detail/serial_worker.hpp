// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Internal: a thread of cuasync's own that runs tasks one at a time, in the order they were posted, for work
//! that may block and must not run on a thread that awaits (the reaper's frees, pinned memory allocated ahead).
//! Started on the first post; at process exit it runs what is queued, then stops, and a task posted after that is
//! run by its poster. Exit waits for the queue at most `exit_wait`: a task that never ends (a free behind a kernel
//! that never ends) is left running to the process's end.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace cuasync::detail {

class serial_worker {
 public:
  //! A worker that lives for the whole process (never destroyed: threads may post during exit). `name` is the
  //! thread's name (at most 15 characters). Thread-safe.
  static serial_worker& make(const char* name);

  //! Queues `task` (moved from only when taken); false when the worker cannot take it (no memory, or stopped at
  //! exit): the caller runs it then.
  bool post(std::function<void()>&& task) noexcept;
  //! Queues `task`, or runs it here when the worker cannot take it.
  void post_or_run(std::function<void()> task) noexcept {
    if (!post(std::move(task))) task();
  }
  //! Waits (blocking) until every task posted before the call has run; at once on the worker's own thread.
  void drain() noexcept;
  //! True on the worker's thread.
  bool on_worker() const noexcept;
  //! True once process exit has begun stopping it (a task that polls can give up then).
  bool stopping() const noexcept;
  std::uint64_t posted() const noexcept;
  std::uint64_t ran() const noexcept;

 private:
  explicit serial_worker(const char* name) noexcept : name_(name) {}
  void run() noexcept;
  void stop() noexcept;  // at exit

  static constexpr std::chrono::milliseconds exit_wait{2000};

  const char* name_;
  mutable std::mutex mutex_;
  std::condition_variable work_, ran_cv_, exited_cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t posted_ = 0, ran_ = 0;
  bool stopping_ = false;
  bool exited_ = false;  // run() has returned
  std::thread thread_;
  std::thread::id id_;
};

}  // namespace cuasync::detail
