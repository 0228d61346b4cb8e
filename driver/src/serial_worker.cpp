// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/detail/serial_worker.hpp>

#include <cuasync/driver/detail/relaxed_capture.hpp>

#include <cstdlib>
#include <pthread.h>
#include <vector>

namespace cuasync::detail {

serial_worker& serial_worker::make(const char* name) {
  auto* w = new serial_worker(name);
  // Registered per worker: its own stop, after which posts run inline.
  static std::mutex registry_mutex;
  static std::vector<serial_worker*>* workers = nullptr;
  std::lock_guard lock(registry_mutex);
  if (!workers) {
    workers = new std::vector<serial_worker*>;
    std::atexit([] {
      std::vector<serial_worker*> all;
      {
        std::lock_guard l(registry_mutex);
        all = *workers;
      }
      for (serial_worker* x : all) x->stop();
    });
  }
  workers->push_back(w);
  return *w;
}

bool serial_worker::post(std::function<void()>&& task) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
      id_ = thread_.get_id();
    }
    queue_.push_back(std::move(task));
    ++posted_;
  } catch (...) {
    return false;
  }
  work_.notify_one();
  return true;
}

void serial_worker::drain() noexcept {
  if (on_worker()) return;  // the tasks before it include the one this thread is running
  std::unique_lock lock(mutex_);
  const std::uint64_t target = posted_;
  ran_cv_.wait(lock, [&] { return ran_ >= target; });
}

bool serial_worker::on_worker() const noexcept {
  std::lock_guard lock(mutex_);
  return thread_.joinable() && id_ == std::this_thread::get_id();
}

bool serial_worker::stopping() const noexcept {
  std::lock_guard lock(mutex_);
  return stopping_;
}

std::uint64_t serial_worker::posted() const noexcept {
  std::lock_guard lock(mutex_);
  return posted_;
}

std::uint64_t serial_worker::ran() const noexcept {
  std::lock_guard lock(mutex_);
  return ran_;
}

void serial_worker::run() noexcept {
  pthread_setname_np(pthread_self(), name_);
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {  // stopping, nothing left
      exited_ = true;
      exited_cv_.notify_all();
      return;
    }
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      relaxed_capture_scope relaxed;  // cuasync's thread: its driver calls invalidate no other thread's capture
      task();
    } catch (...) {
      // A task reports its own failures; one that throws anyway must not end the thread.
    }
    task = nullptr;  // what it captured goes before the count says it ran
    lock.lock();
    ++ran_;
    ran_cv_.notify_all();
  }
}

void serial_worker::stop() noexcept {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  work_.notify_one();
  if (!thread_.joinable() || id_ == std::this_thread::get_id()) return;
  // After the queue has run, or never: a task stuck in the driver is left to the process's end (the worker is never
  // destroyed, so its thread is never joined then).
  if (!exited_cv_.wait_for(lock, exit_wait, [&] { return exited_; })) return;
  lock.unlock();
  thread_.join();
}

}  // namespace cuasync::detail
