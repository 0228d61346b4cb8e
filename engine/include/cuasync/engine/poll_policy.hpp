#pragma once
//! @file How the completion engine waits for GPU work: who polls (a shared poller thread, or the I/O executor
//! itself) and how often. Adaptive: right after activity (a new wait or a completion) it polls back to back for a
//! short spin window; then it sleeps between passes, each sleep a fraction of the time already waited (so the
//! wake-up overhead stays a bounded fraction of the wait), clamped to [min_sleep, max_sleep]; when nothing is pending
//! the poller thread watches 50 µs for the next wait (a closed loop's comes within microseconds, and waking a blocked
//! thread costs several), then blocks (zero CPU when idle).
//!
//! `balanced` mixes both: the io executor polls back to back for a short window after activity (the latency floor for
//! short work), then hands the remaining waits to the poller thread and its backoff (little CPU for long waits).
//!
//! Measured on an H200 (docs/architecture.md, "Seeing completion"): a poller that hands a completion to an
//! io thread blocked in `run()` adds ~5–6 µs over a raw busy `cuEventQuery`; an io thread polling itself matches the
//! raw floor. Waiting on a 1 s kernel costs 33% of a core with 10 µs sleeps and 1.8% with 1 ms sleeps.

#include <chrono>
#include <cstdint>
#include <string_view>

namespace cuasync {

//! Who runs the poll passes.
enum class poll_mode : std::uint8_t {
  //! One poller thread per process (started lazily, stopped when the last service shuts down) polls every service
  //! and posts completions to each operation's I/O executor. No user code runs on it. With
  //! `poll_policy::executor_window` > 0 the I/O executor polls first, for that window after each activity.
  poller_thread,
  //! The I/O executor polls: while waits are pending the service keeps one poll task posted to the executor (re-posted
  //! during the spin window, then on a timer). No extra thread; lowest latency; it uses the io thread's CPU while
  //! waits are pending, but never blocks it (other handlers run between passes).
  in_executor,
};

//! The knobs of adaptive waiting. Use one of the presets, or adjust one.
struct poll_policy {
  poll_mode mode = poll_mode::poller_thread;
  //! After activity, poll back to back for this long (0: sleep at once).
  std::chrono::nanoseconds spin{100'000};
  //! The shortest and longest sleep between passes once the spin window has passed.
  std::chrono::nanoseconds min_sleep{10'000};
  std::chrono::nanoseconds max_sleep{1'000'000};
  //! Sleep ≈ (time since the last activity) / backoff_divisor, clamped to [min_sleep, max_sleep]: a long wait is
  //! polled rarely, a short one often.
  unsigned backoff_divisor = 10;
  //! How often a slow pass queries every pending operation, not only each queue's head, so that an operation whose
  //! event completed out of queue order (e.g. two threads recording on one stream) never waits forever.
  std::chrono::nanoseconds watchdog{500'000'000};
  //! poller_thread mode only: for this long after the last activity the host's own thread (an Asio I/O executor)
  //! polls itself, back to back (as in_executor mode; a thread that hands a completion over adds ~5 µs of wake-up).
  //! Then it hands the waits to the poller thread, whose first sleep is already window / backoff_divisor. The thread
  //! also takes over when the executor runs no pass for a window (a busy or stopped io thread). 0: the thread polls
  //! from the start. Front-ends without an executor of their own (the engine's callbacks) ignore it.
  std::chrono::nanoseconds executor_window{0};

  //! In-executor polling, spin 2 ms, then 10–200 µs sleeps (divisor 20). Round trip at the raw busy-query floor;
  //! the io thread spins while waits are pending.
  static poll_policy latency() noexcept {
    return {poll_mode::in_executor, std::chrono::microseconds(2000), std::chrono::microseconds(10),
            std::chrono::microseconds(200), 20, std::chrono::milliseconds(200), {}};
  }
  //! The default: the io executor polls back to back for 150 µs after activity (short work completes at the
  //! latency floor), then the poller thread takes over with sleeps from 15 µs (150 µs / divisor 10) to 1 ms (its
  //! 100 µs spin only matters when the executor cannot poll): 1.2–2.7% of a core measured while a 1 s kernel is
  //! awaited.
  static poll_policy balanced() noexcept {
    poll_policy p;
    p.executor_window = std::chrono::microseconds(150);
    return p;
  }
  //! Poller thread, no spin, 50 µs–5 ms sleeps (divisor 4): least CPU, round trip ~50–100 µs.
  static poll_policy efficient() noexcept {
    return {poll_mode::poller_thread, std::chrono::nanoseconds(0), std::chrono::microseconds(50),
            std::chrono::milliseconds(5), 4, std::chrono::seconds(1), {}};
  }
  //! "latency", "balanced" or "efficient" (e.g. from an environment variable); nullptr-safe. Unknown names give
  //! `balanced()` and set `*known` to false when `known` is given.
  static poll_policy from_name(std::string_view name, bool* known = nullptr) noexcept;
  //! The policy named by `$CUASYNC_POLL_POLICY`, else `balanced()`: what every engine front-end starts with.
  static poll_policy from_environment() noexcept;

  //! How long to wait before the next pass, `since_activity` after the last activity: 0 within the spin window,
  //! otherwise a sleep in [min_sleep, max_sleep].
  std::chrono::nanoseconds next_delay(std::chrono::nanoseconds since_activity) const noexcept;

  friend bool operator==(const poll_policy&, const poll_policy&) = default;
};

}  // namespace cuasync
