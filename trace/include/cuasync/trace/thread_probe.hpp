// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! What another thread of this process is doing, for the io-thread watchdog, when no driver call explains it:
//! - its scheduler accounting (Linux `/proc/self/task/<tid>/schedstat` and stat): how much of a stall it spent on a
//!   CPU, waiting for one (runnable but not scheduled: an overloaded machine) or asleep (a lock, a syscall);
//! - a sample of its stack, taken by a signal sent to that thread alone, whose handler calls `backtrace` into a
//!   static buffer (the unwinder is loaded beforehand, not in the handler).
//!
//! The signal is a real-time one (`SIGRTMIN + 7`, or `CUASYNC_WATCHDOG_SIGNAL=<number>`; `0` turns sampling off). Its
//! handler is installed on the first sample, only while the signal's disposition is the default one: a program that
//! handles that signal itself keeps it, and sampling stays off. The handler is installed with SA_RESTART (system
//! calls resume) and keeps errno. Caveat: `backtrace` in a signal handler is not async-signal-safe in the letter (the
//! unwinder may take a lock the interrupted code holds: a thread in the middle of dlopen or of throwing an exception
//! may then stay stuck); the watchdog is a debug mode, and the sampler never waits for an answer longer than asked.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cuasync::trace {

//! Makes the calling thread known to the probes below (its OS thread id, by its ordinal). Cheap after the first call
//! on a thread; the watchdog's heartbeat calls it on every io thread.
void register_this_thread() noexcept;

//! A thread's scheduler accounting at one moment.
struct thread_times {
  std::int64_t at_ns = 0;       //!< when it was read (trace::now_ns())
  std::int64_t on_cpu_ns = 0;   //!< time run on a CPU since the thread began
  std::int64_t waiting_ns = 0;  //!< time runnable but waiting for a CPU since the thread began
};

//! Reads the accounting of the registered thread with ordinal `thread`; false when it is unknown, gone, or the kernel
//! keeps no schedstat.
bool read_thread_times(std::uint64_t thread, thread_times& out) noexcept;

//! "running" (on a CPU or runnable), "asleep in futex", "in uninterruptible wait (ioctl)", ... for the registered
//! thread with ordinal `thread`; "" when it is unknown or gone.
std::string describe_thread_state(std::uint64_t thread);

//! "futex", "epoll_wait", ... for a system call number of this architecture ("syscall 123" for others).
std::string syscall_name(long number);

//! Samples the stack of the registered thread with ordinal `thread`: its return addresses, innermost first (the
//! interrupted instruction first). Empty when sampling is off, the thread is unknown or gone, or it did not answer
//! within `wait`. One sample at a time per process (callers queue).
std::vector<void*> sample_stack(std::uint64_t thread, std::chrono::milliseconds wait);

//! "f(int) at libfoo.so+0x1234" for each of `frames`, innermost first, at most `max`: every frame, cuasync's and the
//! system libraries' too (a stalled handler may be stuck in either); names longer than 200 characters are cut.
std::vector<std::string> describe_stack(const std::vector<void*>& frames, std::size_t max = 16);

}  // namespace cuasync::trace
