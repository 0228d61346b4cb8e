// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `io_watchdog`: debug mode for io threads. A thread of its own posts a heartbeat handler to each watched
//! executor every threshold / 4; when one is overdue by more than the threshold, the thread that runs that executor is
//! stuck in a handler, and the watchdog reports it once per stall — with the driver call the thread is blocked in
//! (`cuMemFree`, a synchronize, a pageable copy: every `trace::host_call`), since when, the caller's source location
//! and frames; without a driver call, a sample of the thread's stack (trace/thread_probe.hpp: a signal to that
//! thread) — then once more when the stall ends, with its length and how the thread spent it (on a CPU, waiting for
//! one, asleep). A driver call on a known io thread that lasts longer than the threshold is reported the same way
//! even while other threads of that executor run handlers.
//!
//! Turning it on: construct one (`io_watchdog w(io);`), or set `CUASYNC_WATCHDOG_MS=<threshold>`: then every
//! executor that async_io's operations complete on (the first of each `completion_service`) is watched by a
//! process-wide watchdog, and `from_environment(io)` gives one for other contexts.
//!
//! Cost: nothing until one is constructed (trace's watch bit is off: a `host_call` is one load and a branch). While
//! one lives, every `host_call` publishes its call (a backtrace, ~2 µs), each watched executor runs a tiny handler
//! every threshold / 4, and the watchdog's thread wakes as often and reads the io thread's schedstat (one small
//! /proc file). A stall without a driver call interrupts the stalled thread once, for its stack
//! (`CUASYNC_WATCHDOG_SIGNAL` picks the signal, 0 turns sampling off; see trace/thread_probe.hpp for its caveat). It
//! never blocks an io thread: the heartbeat makes three atomic stores. Caveat: the heartbeat is a queued handler, so
//! `run_one()` and `poll()` can run it instead of one of yours, and a `run()` with nothing else to do returns up to
//! one heartbeat later.
//!
//! Thread-safe. The destructor stops and joins the watchdog's thread (it does not wait for a stall to end). A context
//! must have run one heartbeat before its thread can be named: `watch()` queues the first at once. A watched
//! io_context may be stopped (a stopped context is not stalled) or destroyed before the watchdog: the watchdog learns
//! of it through a service of that context and posts nothing to it afterwards.

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace cuasync {

//! One report: a stall that began (`ended` false, `duration` so far) or ended (`ended` true, its whole length).
struct stall_report {
  std::uint64_t thread = 0;     //!< the stalled thread's ordinal (trace::this_thread_ordinal(), its trace lane's id)
  std::string thread_name;      //!< its OS name, when it has one
  std::string call;             //!< the driver call it is blocked in ("cuMemFree"), or "" when none is in flight
  std::source_location where;   //!< the library caller's location when the hook knew it (file_name() "" otherwise)
  std::vector<std::string> frames;  //!< the caller's frames that are not cuasync's, std's or Boost's, innermost first
  std::chrono::nanoseconds duration{};       //!< how long the thread has run no handler of the executor (or had)
  std::chrono::nanoseconds call_duration{};  //!< how long it has been in `call` (0 without one)
  bool ended = false;
  //! Begun reports: the thread's state when the stall was seen ("running", "asleep (futex)", ...; "" when unknown).
  std::string state;
  //! Begun reports of a stall without a driver call in flight: the thread's stack, sampled then (every frame,
  //! innermost first: what the handler is doing; empty when sampling is off or the thread did not answer in time).
  std::vector<std::string> stack;
  //! Ended reports, when the kernel's accounting could be read (Linux schedstat; else `window` is 0): how the thread
  //! spent a window from just before the stall began to its end — on a CPU (a handler computing), runnable but
  //! waiting for a CPU (an overloaded machine: not the handler's fault), and the rest asleep (a lock, a syscall).
  std::chrono::nanoseconds window{}, on_cpu{}, waiting_for_cpu{};

  //! One line: "io thread 3 (io): blocked for 62 ms so far, in cuMemFree for 61 ms, called from f.cpp:12
  //! (`void serve()`); frames: serve() at ./server+0x1234; state: asleep (ioctl)", or "io thread 3: a handler has
  //! run 61 ms without yielding (no driver call in flight); state: running; stack: spin() at ./server+0x99 | ...";
  //! an ended stall: "io thread 3 (io): the stall ended after 180 ms (it was in cuMemFree); the kernel's accounting
  //! over 182 ms: 1.0 ms on a CPU, 0.0 ms waiting for a CPU, 181 ms asleep".
  std::string text() const;
};

//! Watches executors for handlers that block their thread. See the file comment.
class io_watchdog {
 public:
  //! Where reports go: the default writes `cuasync watchdog: <report.text()>` lines to standard error. Called on the
  //! watchdog's thread, never with a lock held; it must not destroy the watchdog.
  using sink = std::function<void(const stall_report&)>;

  static constexpr std::chrono::milliseconds default_threshold{20};
  //! How many reports `reports()` keeps (the latest).
  static constexpr std::size_t kept_reports = 256;

  //! A watchdog with no executor yet; its thread starts here. @throws std::system_error when no thread can start
  explicit io_watchdog(std::chrono::milliseconds threshold = default_threshold, sink report_to = {});
  //! A watchdog of `io`.
  explicit io_watchdog(boost::asio::io_context& io, std::chrono::milliseconds threshold = default_threshold,
                       sink report_to = {});
  ~io_watchdog();
  io_watchdog(const io_watchdog&) = delete;
  io_watchdog& operator=(const io_watchdog&) = delete;

  //! Watches `io` (its heartbeat goes through its executor; a stopped `io` is never stalled). The first heartbeat is
  //! queued here, ahead of handlers posted later. @throws std::bad_alloc
  void watch(boost::asio::io_context& io);
  //! Watches an executor (the heartbeat goes through it: a strand's is stalled while its handler runs). When its
  //! context is an io_context (or a thread_pool), a stopped one is not stalled; other contexts are taken to be
  //! running.
  void watch(const boost::asio::any_io_executor& ex);

  std::chrono::milliseconds threshold() const noexcept { return threshold_; }
  //! The latest reports (at most `kept_reports`), oldest first.
  std::vector<stall_report> reports() const;

  //! The threshold `CUASYNC_WATCHDOG_MS` asks for (0 when unset, empty, "0" or not a number): read once.
  static std::chrono::milliseconds environment_threshold();
  //! A watchdog of `io` when `CUASYNC_WATCHDOG_MS` is set, else null: for contexts no async_io operation completes
  //! on (those are watched already; watching one twice reports its stalls twice).
  static std::unique_ptr<io_watchdog> from_environment(boost::asio::io_context& io);
  //! Watches `ex` with the process-wide watchdog of `CUASYNC_WATCHDOG_MS` (created on first use) when it is set;
  //! does nothing otherwise. async_io's completion_service calls it with the executor of its first operation.
  static void watch_if_asked(const boost::asio::any_io_executor& ex);

  struct state;  // what the watchdog's thread works on

 private:
  std::chrono::milliseconds threshold_;
  std::unique_ptr<state> state_;
};

}  // namespace cuasync
