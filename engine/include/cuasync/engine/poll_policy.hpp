// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! How the completion engine waits for GPU work: who polls (a shared poller thread, or the I/O executor
//! itself) and how often. Adaptive: right after activity (a new wait or a completion) it polls back to back for a
//! short spin window; then it sleeps between passes, each sleep a fraction of the time already waited (so the
//! wake-up overhead stays a bounded fraction of the wait), clamped to [min_sleep, max_sleep]; when nothing is pending
//! the poller thread watches 50 µs for the next wait (a closed loop's comes within microseconds, and waking a blocked
//! thread costs several), then blocks (zero CPU when idle).
//!
//! Work that repeats is predicted (`predict`, engine/duration_predictor.hpp): while every pending wait has a predicted
//! end, nothing spins and the passes come only every `fault_check` (a faulted context never writes a host word: the
//! pass's event query is what reports it), until `margin` before the earliest predicted end; from there the close
//! reader (the io executor, or the poller thread for front-ends without one) polls back to back until the wait is
//! done or `margin` past the predicted end, after which the wait counts as unpredicted (the backoff).
//!
//! `balanced` mixes both: the io executor polls back to back for a short window after activity (the latency floor for
//! short work), backs off on its own timer for the first milliseconds (a completion the poller thread sees costs a
//! second wake-up, the io thread's), then hands the remaining waits to the poller thread and its backoff (little CPU
//! for long waits); predicted ends it reads closely itself.
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
  //! polled rarely, a short one often. Polling every Δ is ~Δ/2 late on average (plus the wake-up), so the divisor
  //! bounds the lateness of unpredicted waits to about 1/(2·divisor) of their length.
  unsigned backoff_divisor = 30;
  //! How often a slow pass queries every pending operation, not only each queue's head, so that an operation whose
  //! event completed out of queue order (e.g. two threads recording on one stream) never waits forever.
  std::chrono::nanoseconds watchdog{500'000'000};
  //! poller_thread mode only: for this long after the last activity the host's own thread (an Asio I/O executor)
  //! polls itself, back to back (as in_executor mode; a thread that hands a completion over adds ~5 µs of wake-up).
  //! Then it backs off on its own timer until `executor_backoff`, or while a wait's predicted end is live, and then
  //! hands the waits to the poller thread. The thread also takes over when the executor runs no pass for a window
  //! after its pass was due (a busy or stopped io thread). 0: the thread polls from the start. Front-ends without an
  //! executor of their own (the engine's callbacks) ignore it.
  std::chrono::nanoseconds executor_window{0};
  //! poller_thread mode with an executor window: after the window, until this long after the last activity, the
  //! executor keeps the waits and sleeps between its own passes (the backoff, on a timer) instead of handing them to
  //! the poller thread: a completion the thread sees must then wake the io thread too, a second wake-up after the
  //! completion (measured on the H200: 25–30 µs more on 0.3–3 ms waits). 0: hand over when the window ends.
  std::chrono::nanoseconds executor_backoff{0};
  //! Learn how long repeating work takes (waits that carry a work key) and wake just before its predicted end.
  //! On by default (`CUASYNC_POLL_PREDICT=0` turns it off in from_environment()): on the H200 it puts repeated waits
  //! within 1% of a busy query at every length. An estimate that is too long costs a check at a fraction of the wait
  //! (`check_divisor`) and is lowered; one that is missing or stale leaves the wait to the backoff.
  bool predict = true;
  //! Close reading starts this long before a predicted end, plus 1/64 of the predicted duration (at most 1 ms more),
  //! and goes on as long past it: it covers the sleeper's wake-up (a timer or condition variable in a VM: tens of µs)
  //! and the work's jitter.
  std::chrono::nanoseconds wake_margin{50'000};
  //! While every pending wait has a predicted end, a pass at least this often (the event query in it reports a
  //! device fault, which no host word would show). At most `watchdog`.
  std::chrono::nanoseconds fault_check{10'000'000};
  //! While predicted waits are pending, a pass at least every (time since the earliest one's start) / this (and at
  //! least 2·wake_margin apart): an estimate that is too long (the work got shorter, or a late wake-up hid that it
  //! was) then costs a fraction of the wait, never a sleep to the predicted end or the fault check. The passes grow
  //! geometrically: ~40 in a 1 s wait. 0: none.
  unsigned check_divisor = 4;

  //! In-executor polling, spin 2 ms, then 10–200 µs sleeps (divisor 20). Round trip at the raw busy-query floor;
  //! the io thread spins while waits are pending.
  static poll_policy latency() noexcept {
    poll_policy p{poll_mode::in_executor, std::chrono::microseconds(2000), std::chrono::microseconds(10),
                  std::chrono::microseconds(200), 20, std::chrono::milliseconds(200), {}};
    p.fault_check = std::chrono::milliseconds(2);
    return p;
  }
  //! The default: the io executor polls back to back for 150 µs after activity (short work completes at the
  //! latency floor), then backs off on its own timer (divisor 30) until 5 ms after activity, then the poller thread
  //! takes over with sleeps up to 2 ms (a sleep reaches 2 ms only 60 ms into a wait, where it is ≤ 1.7% of it; its
  //! 100 µs spin only matters when the executor cannot poll). Predicted waits skip the window: the io executor sleeps
  //! on a timer until just before the predicted end and reads closely itself.
  static poll_policy balanced() noexcept {
    poll_policy p;
    p.executor_window = std::chrono::microseconds(150);
    p.executor_backoff = std::chrono::milliseconds(5);
    p.max_sleep = std::chrono::milliseconds(2);
    return p;
  }
  //! Poller thread, no spin, 50 µs–5 ms sleeps (divisor 4): least CPU, round trip ~50–100 µs.
  //! Predicted waits are read closely by the poller thread (a hand-over to the io thread costs ~5 µs more).
  static poll_policy efficient() noexcept {
    poll_policy p{poll_mode::poller_thread, std::chrono::nanoseconds(0), std::chrono::microseconds(50),
                  std::chrono::milliseconds(5), 4, std::chrono::seconds(1), {}};
    p.fault_check = std::chrono::milliseconds(50);
    return p;
  }
  //! "latency", "balanced" or "efficient" (e.g. from an environment variable); nullptr-safe. Unknown names give
  //! `balanced()` and set `*known` to false when `known` is given.
  static poll_policy from_name(std::string_view name, bool* known = nullptr) noexcept;
  //! The policy named by `$CUASYNC_POLL_POLICY`, else `balanced()`: what every engine front-end starts with.
  static poll_policy from_environment() noexcept;

  //! How long to wait before the next pass, `since_activity` after the last activity: 0 within the spin window,
  //! otherwise a sleep in [min_sleep, max_sleep].
  std::chrono::nanoseconds next_delay(std::chrono::nanoseconds since_activity) const noexcept;

  //! The earliest predicted end among the pending waits.
  struct predicted_end {
    std::chrono::nanoseconds until;     //!< the predicted end minus now (negative once past)
    std::chrono::nanoseconds duration;  //!< the predicted duration (the margin grows with it)
  };
  //! Close reading starts `margin(duration)` before a predicted end and ends as long after it.
  std::chrono::nanoseconds margin(std::chrono::nanoseconds duration) const noexcept;
  //! The delay before the next pass with predictions: `earliest` (null: none), `unpredicted` (some pending wait has no
  //! live prediction: the backoff applies to it), `close_reader` (this poller reads closely around predicted ends;
  //! another only covers them: the fault check, and a pass once the close-read window is over). 0: poll now.
  std::chrono::nanoseconds next_delay(std::chrono::nanoseconds since_activity, const predicted_end* earliest,
                                      bool unpredicted, bool close_reader) const noexcept;
  //! The longest sleep while a predicted wait has run `overrun` past its close-read window (its work took longer than
  //! learned): an eighth of the overrun, at least wake_margin / 2. The backoff alone (a fraction of the time since
  //! activity, up to max_sleep) was 1.2 ms late at p99 on 20 ms waits on the H200; this keeps the lateness a fraction
  //! of how far the prediction was off.
  std::chrono::nanoseconds overrun_delay(std::chrono::nanoseconds overrun) const noexcept;

  friend bool operator==(const poll_policy&, const poll_policy&) = default;
};

}  // namespace cuasync
