// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// For benchmarks that take a thread's call stack in a signal handler (cpu_sampler.hpp, async_io's gap_stacks.hpp):
// backtrace() called once first, so that its library is loaded and nothing allocates in the handler, then the
// handler installed with SA_RESTART (an interrupted call goes on).
#include <execinfo.h>
#include <signal.h>

namespace cuasync::bench {

inline void install_stack_signal(int sig, void (*handler)(int)) {
  void* warm[4];
  backtrace(warm, 4);
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

}  // namespace cuasync::bench
