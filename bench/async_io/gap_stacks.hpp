// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What an io thread is doing while its timer is late: a watcher thread sees the gap meter's last tick grow old
// (past `threshold`) and interrupts the io thread with a signal whose handler takes its call stack; the watcher
// prints each stack's frames as object file + offset (resolve them with `addr2line -f -C -e FILE OFFSET` against
// the same build). For a probe only: backtrace() in a signal handler is not async-signal-safe in general (it is
// called once beforehand, so that its library is loaded and nothing allocates in the handler).
#include "../../tests/async_io/gap_meter.hpp"

#include "../common/stack_signal.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace cuasync::bench {

class gap_stacks {
 public:
  //! Starts watching `meter`, whose ticks run on the calling thread (the io thread). At most `max_samples` stacks.
  //! With `every`, a stack each 0.5 ms while a gap lasts (a profile of the gaps), not only one per gap.
  gap_stacks(const test::gap_meter& meter, std::chrono::nanoseconds threshold, int max_samples = 12, bool every = false)
      : meter_(meter),
        target_(pthread_self()),
        threshold_(threshold.count()),
        max_samples_(max_samples),
        every_(every) {
    install_stack_signal(SIGUSR2, &on_signal);
    watcher_ = std::thread([this] { watch(); });
  }
  ~gap_stacks() {
    stop_ = true;
    watcher_.join();
  }

 private:
  static constexpr int depth = 40;
  static inline std::atomic<int> frames_{-1};
  static inline void* stack_[depth];
  static void on_signal(int) {
    frames_.store(backtrace(stack_, depth), std::memory_order_release);
  }
  static long long now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
  void watch() {
    const long long t0 = now_ns();
    long long sampled_tick = 0;
    int samples = 0;
    while (!stop_ && samples < max_samples_) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      const long long tick = meter_.last_tick_ns();
      if (tick == 0 || (tick == sampled_tick && !every_) || now_ns() - tick < threshold_) continue;
      sampled_tick = tick;  // one stack per gap, or (every_) one each 0.5 ms while the gap lasts
      frames_.store(-1, std::memory_order_relaxed);
      pthread_kill(target_, SIGUSR2);
      int n = -1;
      for (int i = 0; i < 2000 && (n = frames_.load(std::memory_order_acquire)) < 0; ++i)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      ++samples;
      std::printf("gap stack %d at %.1f ms (the timer %.2f ms late so far):\n", samples, (now_ns() - t0) / 1e6,
                  (now_ns() - tick) / 1e6 - 1.0);
      for (int i = 2; i < n; ++i) {  // 0, 1: the handler and the signal frame
        Dl_info info{};
        if (dladdr(stack_[i], &info) && info.dli_fname)
          std::printf("  #%d %s +0x%lx %s\n", i, info.dli_fname,
                      static_cast<unsigned long>(static_cast<const char*>(stack_[i]) -
                                                 static_cast<const char*>(info.dli_fbase)),
                      info.dli_sname ? info.dli_sname : "");
        else
          std::printf("  #%d %p\n", i, stack_[i]);
      }
    }
  }
  const test::gap_meter& meter_;
  pthread_t target_;
  long long threshold_;
  int max_samples_;
  bool every_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

}  // namespace cuasync::bench
