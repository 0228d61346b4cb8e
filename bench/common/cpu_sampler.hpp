// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Where a benchmark's CPU time goes, on a machine without perf: while a `cpu_sampler::scope` lives, a watcher thread
// interrupts every running thread of the process (state R in /proc) every ~200 us with SIGPROF, whose handler takes
// the thread's call stack; the scope's end appends the stacks to the file named by CUASYNC_BENCH_SAMPLES, one line
// per sample: `label tid object+offset...` (leaf first). scripts/cpu-samples.py resolves and sums them against the
// same build. Off (no thread, no signal) without the variable. For benchmarks only: backtrace() in a signal handler
// is not async-signal-safe in general (called once first, so that its library is loaded and nothing allocates).
#include <dirent.h>
#include "stack_signal.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::bench {

class cpu_sampler {
 public:
  static constexpr int depth = 24;
  struct sample {
    int tid;
    int frames;
    void* pc[depth];
  };

  static const char* path() { return std::getenv("CUASYNC_BENCH_SAMPLES"); }

  class scope {
   public:
    explicit scope(std::string label) : label_(std::move(label)) {
      if (!path() || label_.empty()) return;  // an empty label: not sampled
      cpu_sampler& s = instance();
      s.used_.store(0, std::memory_order_relaxed);
      s.stop_ = false;
      watcher_ = std::thread([&s] { s.watch(); });
    }
    ~scope() {
      if (!watcher_.joinable()) return;
      cpu_sampler& s = instance();
      s.stop_ = true;
      watcher_.join();
      s.dump(label_);
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    std::string label_;
    std::thread watcher_;
  };

 private:
  cpu_sampler() : samples_(max_samples) {
    install_stack_signal(SIGPROF, &on_signal);
  }
  static cpu_sampler& instance() {
    static cpu_sampler* s = new cpu_sampler;  // never destroyed: a late signal finds it
    return *s;
  }
  static constexpr std::size_t max_samples = 200'000;

  static void on_signal(int) {
    cpu_sampler& s = instance();
    const std::size_t i = s.used_.fetch_add(1, std::memory_order_relaxed);
    if (i >= max_samples) return;
    sample& x = s.samples_[i];
    x.tid = static_cast<int>(syscall(SYS_gettid));
    x.frames = backtrace(x.pc, depth);
  }

  static bool running(int tid) {
    char name[64];
    std::snprintf(name, sizeof name, "/proc/self/task/%d/stat", tid);
    FILE* f = std::fopen(name, "r");
    if (!f) return false;
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* close = nullptr;  // the state follows the command's closing parenthesis
    for (const char* p = buf; *p; ++p)
      if (*p == ')') close = p;
    return close && close[1] == ' ' && close[2] == 'R';
  }

  void watch() {
    const int self = static_cast<int>(syscall(SYS_gettid));
    const int pid = static_cast<int>(getpid());
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      DIR* d = opendir("/proc/self/task");
      if (!d) return;
      while (dirent* e = readdir(d)) {
        const int tid = std::atoi(e->d_name);
        if (tid <= 0 || tid == self || !running(tid)) continue;
        syscall(SYS_tgkill, pid, tid, SIGPROF);
      }
      closedir(d);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the last handlers finish
  }

  void dump(const std::string& label) {
    FILE* f = std::fopen(path(), "a");
    if (!f) return;
    const std::size_t n = std::min(used_.load(), max_samples);
    for (std::size_t i = 0; i < n; ++i) {
      const sample& x = samples_[i];
      std::fprintf(f, "%s %d", label.c_str(), x.tid);
      for (int j = 2; j < x.frames; ++j) {  // 0, 1: the handler and the signal frame
        Dl_info info{};
        if (dladdr(x.pc[j], &info) && info.dli_fname) {
          const char* base = std::strrchr(info.dli_fname, '/');
          std::fprintf(f, " %s+0x%lx", base ? base + 1 : info.dli_fname,
                       static_cast<unsigned long>(static_cast<const char*>(x.pc[j]) -
                                                  static_cast<const char*>(info.dli_fbase)));
        } else {
          std::fprintf(f, " ?+%p", x.pc[j]);
        }
      }
      std::fputc('\n', f);
    }
    std::fclose(f);
  }

  std::vector<sample> samples_;
  std::atomic<std::size_t> used_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace cuasync::bench
