// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probing another thread of this process: its scheduler accounting from /proc, and its stack through a signal.
#include <cuasync/trace/thread_probe.hpp>

#include <cuasync/trace/clock.hpp>

#include "watch_slots.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace cuasync::trace {
namespace {

// Reads a small /proc file whole (they are generated at the read: one read gives a consistent view).
bool read_small_file(const char* path, char* text, std::size_t size) noexcept {
  std::FILE* f = std::fopen(path, "re");
  if (!f) return false;
  const std::size_t n = std::fread(text, 1, size - 1, f);
  std::fclose(f);
  text[n] = '\0';
  return n > 0;
}

// The sampling signal's one request at a time: the sampler names a thread and raises `phase` to requested; the
// handler, on that thread only, takes it (writing), fills `frames` and publishes (done). A sampler that stops
// waiting takes a request back before the handler took it, so a late signal finds nothing to do.
enum : int { idle, requested, writing, done };
struct sample_exchange {
  std::atomic<int> phase{idle};
  std::atomic<long> target{0};
  std::atomic<int> count{0};
  void* frames[64];
};
sample_exchange exchange;

void on_sample_signal(int) {
  const int saved_errno = errno;
  if (::syscall(SYS_gettid) == exchange.target.load(std::memory_order_acquire)) {
    int expected = requested;
    if (exchange.phase.compare_exchange_strong(expected, writing, std::memory_order_acq_rel)) {
      exchange.count.store(backtrace(exchange.frames, 64), std::memory_order_relaxed);
      exchange.phase.store(done, std::memory_order_release);
    }
  }
  errno = saved_errno;
}

// The signal asked for, installed once: 0 when sampling is off (asked, or the signal is the program's own).
int sampling_signal() noexcept {
  static const int installed = []() noexcept {
    int sig = SIGRTMIN + 7;
    if (const char* asked = std::getenv("CUASYNC_WATCHDOG_SIGNAL"); asked && *asked) {
      char* end = nullptr;
      const long n = std::strtol(asked, &end, 10);
      if (*end != '\0' || n <= 0 || n >= NSIG) return 0;
      sig = static_cast<int>(n);
    }
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return 0;  // the program's own
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder here, not inside the handler
    struct sigaction sa {};
    sa.sa_handler = on_sample_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, nullptr) == 0 ? sig : 0;
  }();
  return installed;
}

// True once `phase` is `want`, polled for at most `wait`.
bool wait_for_phase(int want, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (exchange.phase.load(std::memory_order_acquire) != want) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

}  // namespace

void register_this_thread() noexcept { detail::register_thread(); }

bool read_thread_times(std::uint64_t thread, thread_times& out) noexcept {
  const long tid = detail::os_thread_of(thread);
  if (tid == 0) return false;
  char path[64], text[128];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
  unsigned long long on_cpu = 0, waiting = 0;
  if (!read_small_file(path, text, sizeof text) || std::sscanf(text, "%llu %llu", &on_cpu, &waiting) != 2)
    return false;
  out.at_ns = now_ns();
  out.on_cpu_ns = static_cast<std::int64_t>(on_cpu);
  out.waiting_ns = static_cast<std::int64_t>(waiting);
  return true;
}

std::string describe_thread_state(std::uint64_t thread) {
  const long tid = detail::os_thread_of(thread);
  if (tid == 0) return "";
  char path[64], text[1024];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
  if (!read_small_file(path, text, sizeof text)) return "";
  const char* after_name = std::strrchr(text, ')');  // the name may hold spaces and parentheses
  if (!after_name || after_name[1] != ' ') return "";
  const char state = after_name[2];
  if (state == 'R') return "running";
  std::string where;
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
  long number = -1;
  if (read_small_file(path, text, sizeof text) && std::sscanf(text, "%ld", &number) == 1 && number >= 0)
    where = " (" + syscall_name(number) + ")";
  if (state == 'S') return "asleep" + where;
  if (state == 'D') return "in an uninterruptible wait" + where;
  return std::string("in state ") + state + where;
}

std::string syscall_name(long number) {
#if defined(__x86_64__)
  switch (number) {
    case SYS_futex: return "futex";
    case SYS_epoll_wait: return "epoll_wait";
    case SYS_epoll_pwait: return "epoll_pwait";
    case SYS_poll: return "poll";
    case SYS_ppoll: return "ppoll";
    case SYS_read: return "read";
    case SYS_write: return "write";
    case SYS_ioctl: return "ioctl";
    case SYS_nanosleep: return "nanosleep";
    case SYS_clock_nanosleep: return "clock_nanosleep";
    case SYS_sched_yield: return "sched_yield";
    case SYS_mmap: return "mmap";
    case SYS_munmap: return "munmap";
    case SYS_mprotect: return "mprotect";
    case SYS_madvise: return "madvise";
    case SYS_openat: return "openat";
    case SYS_close: return "close";
    default: break;
  }
#endif
  return "syscall " + std::to_string(number);
}

std::vector<void*> sample_stack(std::uint64_t thread, std::chrono::milliseconds wait) {
  const int sig = sampling_signal();
  const long tid = sig ? detail::os_thread_of(thread) : 0;
  if (tid == 0) return {};
  static std::mutex one_at_a_time;
  static bool broken = false;  // a handler that never finished still owns the buffer
  std::lock_guard lock(one_at_a_time);
  if (broken) return {};
  exchange.target.store(tid, std::memory_order_release);
  exchange.phase.store(requested, std::memory_order_release);
  if (::syscall(SYS_tgkill, ::getpid(), tid, sig) != 0) {
    exchange.phase.store(idle, std::memory_order_release);
    return {};
  }
  if (!wait_for_phase(done, wait)) {
    int expected = requested;
    if (exchange.phase.compare_exchange_strong(expected, idle, std::memory_order_acq_rel)) return {};
    if (!wait_for_phase(done, wait)) {  // the handler is writing: give it as long again, then give up on sampling
      broken = true;
      return {};
    }
  }
  const int n = exchange.count.load(std::memory_order_relaxed);
  // The handler's own frame and the signal trampoline come first.
  std::vector<void*> frames(exchange.frames + (n > 2 ? 2 : n), exchange.frames + n);
  exchange.phase.store(idle, std::memory_order_release);
  return frames;
}

std::vector<std::string> describe_stack(const std::vector<void*>& frames, std::size_t max) {
  constexpr std::size_t longest_name = 200;
  std::vector<std::string> out;
  for (void* frame : frames) {
    if (out.size() >= max) break;
    Dl_info info{};
    if (!dladdr(frame, &info)) info = Dl_info{};
    std::string name = info.dli_sname ? detail::demangled(info.dli_sname) : "?";
    if (name.size() > longest_name) name = name.substr(0, longest_name) + "...";
    std::string module = info.dli_fname ? info.dli_fname : "?";
    module = module.substr(module.rfind('/') + 1);
    char offset[32] = "";
    if (info.dli_fbase)
      std::snprintf(offset, sizeof offset, "+0x%llx",
                    static_cast<unsigned long long>(static_cast<char*>(frame) - static_cast<char*>(info.dli_fbase)));
    out.push_back(name + " at " + module + offset);
  }
  return out;
}

}  // namespace cuasync::trace
