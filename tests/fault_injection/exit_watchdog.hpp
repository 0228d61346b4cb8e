// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// For a child that ends with work still running on the GPU (a kernel that never ends): if the process has not ended
// `limit` after the call, prints the main thread's stack ("EXIT HANG: ...", where exit hangs) and ends it with status 3.
#include <execinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace cuasync::test {

inline void on_exit_hang_signal(int) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  static const char head[] = "EXIT HANG: the main thread is at\n";
  (void)!::write(1, head, sizeof head - 1);
  backtrace_symbols_fd(frames, n, 1);
}

//! Called on the main thread, just before it returns from the child's case.
inline void arm_exit_watchdog(std::chrono::seconds limit) {
  std::signal(SIGUSR1, on_exit_hang_signal);
  const pid_t main_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  std::thread([main_tid, limit] {
    std::this_thread::sleep_for(limit);
    ::syscall(SYS_tgkill, ::getpid(), main_tid, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ::_exit(3);
  }).detach();
}

}  // namespace cuasync::test
