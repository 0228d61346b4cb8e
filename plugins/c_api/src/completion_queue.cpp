// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "completion_queue.hpp"
#include "handles.hpp"

#include <cuasync/driver/error.hpp>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace cuasync::c_api {

namespace {
// The queue's lock is held for a few instructions and at most one eventfd syscall. A thread that finds it taken spins
// for it a moment before sleeping: sleeping costs a futex wait and, to the holder, a futex wake (measured: a host
// token's completion took 18 µs to be drained by a spinning consumer, most of it in those two).
std::unique_lock<std::mutex> lock_briefly_spinning(std::mutex& m) {
  std::unique_lock lock(m, std::try_to_lock);
  for (int i = 0; !lock.owns_lock() && i < 4000; ++i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    (void)lock.try_lock();
  }
  if (!lock.owns_lock()) lock.lock();
  return lock;
}
}  // namespace

namespace {
class abi_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuasync"; }
  std::string message(int v) const override { return "cuasync_error_code " + std::to_string(v); }
};

cuasync_completion_record record_of(std::uint64_t token, std::error_code ec) noexcept {
  cuasync_completion_record r{token, CUASYNC_OK, 0};
  if (!ec) return r;
  if (ec.category() == cu_category()) {
    r.code = CUASYNC_ERROR_CUDA;
    r.cuda_result = ec.value();
  } else if (ec.category() == abi_category()) {
    r.code = static_cast<cuasync_error_code>(ec.value());
  } else if (ec == std::errc::operation_canceled) {
    r.code = CUASYNC_ERROR_CANCELLED;
  } else if (ec == std::errc::not_enough_memory) {
    r.code = CUASYNC_ERROR_OUT_OF_MEMORY;
  } else {
    r.code = CUASYNC_ERROR_INTERNAL;
  }
  return r;
}
}  // namespace

const std::error_category& abi_category() noexcept {
  static const abi_category_impl c;
  return c;
}

completion_queue::completion_queue(std::uint32_t flags) : callbacks_(flags & CUASYNC_QUEUE_CALLBACKS) {}

std::shared_ptr<completion_queue> completion_queue::create(std::uint32_t flags) {
  if (!(flags & (CUASYNC_QUEUE_FD | CUASYNC_QUEUE_CALLBACKS)) || (flags & ~std::uint32_t{3}))
    fail(CUASYNC_ERROR_INVALID_ARGUMENT,
         "queue_create: flags " + std::to_string(flags) + " (want CUASYNC_QUEUE_FD and/or CUASYNC_QUEUE_CALLBACKS)");
  std::shared_ptr<completion_queue> q(new completion_queue(flags));
  if (flags & CUASYNC_QUEUE_FD) {
    q->fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd_ < 0) throw std::system_error(errno, std::system_category(), "queue_create: eventfd");
  }
  // The thread holds the queue until close() stops it, so the queue is never destroyed under it.
  if (q->callbacks_) q->thread_ = std::thread([self = q] { self->run_callbacks(); });
  return q;
}

completion_queue::~completion_queue() {
  close();
  if (thread_.joinable()) {  // the last reference was the callback thread's own, dropped as it ended
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
  if (fd_ >= 0) ::close(fd_);
}

namespace {
thread_local const completion_queue* drained_here = nullptr;  // draining_here's queue on this thread
}  // namespace

completion_queue::draining_here::draining_here(const completion_queue* q) noexcept : previous_(drained_here) {
  drained_here = q;
}

completion_queue::draining_here::~draining_here() { drained_here = previous_; }

void completion_queue::deliver(const cuasync_completion_record& r, cuasync_callback cb, void* user_data) noexcept {
  bool make_readable = false;
  try {
    auto lock = lock_briefly_spinning(mutex_);
    if (closed_) return;
    if (cb) {
      pending_.push_back({r, cb, user_data});
      cv_.notify_one();
      return;
    }
    records_.push_back(r);
    queued_.store(records_.size(), std::memory_order_release);
    if (!readable_ && fd_handed_out_ && drained_here != this) {
      readable_ = make_readable = true;
      writes_in_flight_.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    // Out of memory for the queue: the completion is lost; nothing else can be done here.
    return;
  }
  if (make_readable) {
    const std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);  // cannot overflow: the count is cleared whenever the queue empties
    writes_in_flight_.fetch_sub(1, std::memory_order_release);
  }
}

std::size_t completion_queue::drain(cuasync_completion_record* out, std::size_t capacity) {
  // Empty, with the fd clear (both written under the lock, below): nothing to do.
  if (queued_.load(std::memory_order_acquire) == 0 && !fd_left_readable_.load(std::memory_order_acquire)) return 0;
  auto lock = lock_briefly_spinning(mutex_);
  std::size_t n = 0;
  while (n < capacity && !records_.empty()) {
    out[n++] = records_.front();
    records_.pop_front();
  }
  queued_.store(records_.size(), std::memory_order_release);
  if (n < capacity && readable_) {
    // Found empty, under the lock: a record delivered after this makes the fd readable again. A delivery that made
    // it readable may still be writing (after its unlock): that write is let finish first, so the read clears it.
    for (int i = 0; writes_in_flight_.load(std::memory_order_acquire) != 0; ++i) {
      if (i < 1000) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
    std::uint64_t count = 0;
    (void)!::read(fd_, &count, sizeof count);
    readable_ = false;
  }
  if (!records_.empty() && !readable_ && fd_handed_out_) {
    // Left queued by a delivery of a draining_here thread (which wrote nothing): announced now, under the lock (a
    // rare case: more records than this drain takes).
    const std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
    readable_ = true;
  }
  fd_left_readable_.store(records_.empty() && readable_, std::memory_order_release);
  return n;
}

int completion_queue::hand_out_fd() {
  auto lock = lock_briefly_spinning(mutex_);
  if (!fd_handed_out_) {
    fd_handed_out_ = true;
    if (!records_.empty() && !readable_) {  // records queued before: readable at once
      readable_ = true;
      const std::uint64_t one = 1;
      (void)!::write(fd_, &one, sizeof one);
      fd_left_readable_.store(false, std::memory_order_release);
    }
  }
  return fd_;
}

void completion_queue::run_callbacks() {
  for (;;) {
    pending_callback p;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return closed_ || !pending_.empty(); });
      if (closed_) return;
      p = pending_.front();
      pending_.pop_front();
    }
    p.cb(&p.record, p.user_data);  // no lock held: the callback may call cuasync again
  }
}

void completion_queue::close() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    pending_.clear();
    records_.clear();
    queued_.store(0, std::memory_order_release);
    fd_left_readable_.store(false, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();  // destroyed from one of its callbacks: the loop ends when the callback returns
    else
      thread_.join();
  }
}

void delivery::operator()(std::error_code ec) noexcept {
  if (!queue) return;
  queue->deliver(record_of(record.token, ec), cb, user_data);
}

delivery make_delivery(const cuasync_completion& c, const char* what) {
  delivery d;
  if (!c.queue) {
    if (c.callback) fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(what) + ": a callback needs a queue (its thread)");
    return d;
  }
  d.queue = registry::instance().get<completion_queue>(c.queue, kind::queue, "the completion's queue");
  if (c.callback && !d.queue->has_callbacks())
    fail(CUASYNC_ERROR_INVALID_ARGUMENT,
         std::string(what) + ": a callback on a queue created without CUASYNC_QUEUE_CALLBACKS");
  if (!c.callback && !d.queue->has_fd())
    fail(CUASYNC_ERROR_INVALID_ARGUMENT,
         std::string(what) + ": no callback, and the queue was created without CUASYNC_QUEUE_FD");
  d.record.token = c.token;
  d.cb = c.callback;
  d.user_data = c.user_data;
  return d;
}

}  // namespace cuasync::c_api
