// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/poller.hpp>

#include <cuasync/driver/detail/driver_api.hpp>

#include <sys/prctl.h>

#include <algorithm>

namespace cuasync {

namespace {
// Puts the calling thread in relaxed stream-capture mode once a driver is loaded (the engine also runs host-only
// sources, with no driver); returns whether that is done. In global mode, this thread's cuEventQuery during another
// thread's global-mode capture (torch.cuda.graph's) would invalidate that capture; PyTorch's NCCL watchdog makes the
// same exchange for the same reason. A failure is not retried: the thread polls as before.
bool relax_capture_mode() noexcept {
  const auto* d = detail::driver_if_loaded();
  if (!d) return false;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  (void)d->cuThreadExchangeStreamCaptureMode(&mode);
  return true;
}
}  // namespace

namespace detail {
void install_gpu_span_pump() noexcept;  // gpu_span_client.cpp
}  // namespace detail

namespace {
// At start-up, wherever the poller is linked in: traced operations' spans are then read by this poller's thread.
[[maybe_unused]] const bool gpu_span_pump_installed = (detail::install_gpu_span_pump(), true);
}  // namespace

poller& poller::instance() {
  // Never destroyed: front-ends may shut down during static destruction.
  static poller* p = new poller;
  return *p;
}

void poller::add(std::shared_ptr<poll_client> c) {
  std::lock_guard lock(mutex_);
  clients_.push_back(std::move(c));
  wake_flag_ = true;  // a client's tokens may already be done: make the thread look
  if (running_) {
    cv_.notify_one();
    return;
  }
  if (thread_.joinable()) thread_.join();  // a thread told to stop earlier has finished its last pass
  running_ = true;
  thread_ = std::thread([this, g = ++generation_] { run(g); });
}

void poller::remove(const poll_client* c, bool keep_until_finished) {
  std::thread stopped;
  {
    std::lock_guard lock(mutex_);
    if (!keep_until_finished)
      std::erase_if(clients_, [&](const std::shared_ptr<poll_client>& p) { return p.get() == c; });
    if (clients_.empty() && running_) {
      running_ = false;
      stopped_generation_ = generation_;
      wake_flag_ = true;
      stopped = std::move(thread_);
    }
  }
  cv_.notify_all();
  if (stopped.joinable()) {
    if (stopped.get_id() == std::this_thread::get_id())
      stopped.detach();  // a client removed from a pass on this thread: the loop ends after the pass
    else
      stopped.join();
  }
}

void poller::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_flag_ = true;
  }
  wakeups_.fetch_add(1, std::memory_order_relaxed);
  cv_.notify_one();
}

bool poller::linger_for_submission(std::uint64_t seen) const noexcept {
  // Nothing is pending. In a closed loop (a completion, then the next operation) the next wait comes within
  // microseconds: watching for it a short while costs less than blocking, which makes its submitter wake this thread
  // (a futex wake and a scheduler round trip: several µs in a VM).
  const auto until = std::chrono::steady_clock::now() + idle_linger;
  do {
    if (submissions_.load(std::memory_order_seq_cst) != seen) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } while (std::chrono::steady_clock::now() < until);
  return false;
}

void poller::run(std::uint64_t generation) {
  // Short sleeps stay short: the default 50 µs timer slack would stretch a 10 µs sleep to ~50 µs.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::vector<std::shared_ptr<poll_client>> snapshot;
  // Looked at before every pass until a driver is loaded (GPU tokens exist only after that; only a process's first
  // ones, queued between this look and the pass, can be polled once in the thread's default mode).
  bool relaxed = false;
  for (;;) {
    if (!relaxed) relaxed = relax_capture_mode();
    const std::uint64_t seen = submissions_.load(std::memory_order_seq_cst);
    {
      std::lock_guard lock(mutex_);
      if (stopped_generation_ >= generation) return;
      snapshot = clients_;
    }
    std::optional<std::chrono::nanoseconds> delay;
    for (auto& c : snapshot) {
      if (!c->polled_by_thread()) continue;
      std::optional<std::chrono::nanoseconds> d = c->poller_pass();
      if (d) delay = delay ? std::min(*delay, *d) : *d;
    }
    {
      // Clients that shut down leave once their tokens are all done.
      std::lock_guard lock(mutex_);
      std::erase_if(clients_, [](const std::shared_ptr<poll_client>& p) { return p->finished(); });
      if (clients_.empty() && running_) {
        running_ = false;
        stopped_generation_ = generation_;
        thread_.detach();  // this thread: it returns below
        return;
      }
    }
    snapshot.clear();
    if (delay && delay->count() == 0) continue;  // spin window
    if (!delay && linger_for_submission(seen)) continue;
    std::unique_lock lock(mutex_);
    sleeping_.store(true, std::memory_order_seq_cst);
    parked_.store(!delay, std::memory_order_seq_cst);
    if (submissions_.load(std::memory_order_seq_cst) == seen && !wake_flag_) {
      if (delay)
        cv_.wait_for(lock, *delay, [&] { return wake_flag_ || stopped_generation_ >= generation; });
      else
        cv_.wait(lock, [&] { return wake_flag_ || stopped_generation_ >= generation; });  // idle: zero CPU
    }
    wake_flag_ = false;
    parked_.store(false, std::memory_order_relaxed);
    sleeping_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace cuasync
