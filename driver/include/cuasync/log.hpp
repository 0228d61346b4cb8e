// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! A small log for what a user cannot see otherwise: which libcuda and NVRTC were loaded (paths, versions),
//! JIT cache hits and misses, fallbacks taken (PTX for a GPU newer than NVRTC, the path a pageable copy took).
//! Off by default; `CUASYNC_LOG=info` or `CUASYNC_LOG=debug` turns it on, to stderr, one line per message
//! ("cuasync: info: ..."). `set_sink` sends the messages elsewhere (the C ABI's log_sink_set, Python's `logging`).
//! Checking whether a level is on costs one relaxed atomic load; a message is built only when it is.

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace cuasync::logging {

//! How detailed a message is. A threshold of `off` delivers nothing; `info` delivers info; `debug` both.
enum class level : int {
  off = 0,    //!< as a threshold: nothing is delivered
  info = 1,   //!< once-per-process facts and choices: a library loaded, a compile, a fallback taken
  debug = 2,  //!< per-operation detail: memory cache hits, the path each pageable copy took
};

//! "off", "info" or "debug".
const char* to_string(level l) noexcept;

//! Where messages go instead of stderr: called on the thread that logs, with no lock of cuasync's held (the sink may
//! call into cuasync, set_sink included). `message` is borrowed for the call and has no trailing newline. An exception
//! it throws is dropped.
using sink_fn = std::function<void(level l, const char* message)>;

namespace detail {
//! The threshold as an int; -1 until `CUASYNC_LOG` has been read.
extern std::atomic<int> threshold;
//! Reads `CUASYNC_LOG` (once: a threshold set before keeps its value) and returns the threshold.
int read_environment() noexcept;
//! Delivers a message to the sink or stderr. Never throws.
void deliver(level l, std::string_view message) noexcept;
}  // namespace detail

//! True when messages of level `l` are delivered. One relaxed load once the environment has been read.
inline bool enabled(level l) noexcept {
  int t = detail::threshold.load(std::memory_order_relaxed);
  if (t < 0) [[unlikely]]
    t = detail::read_environment();
  return t >= static_cast<int>(l);
}

//! Delivers `message` at level `l` when that level is on. Never throws.
inline void write(level l, std::string_view message) noexcept {
  if (enabled(l)) detail::deliver(l, message);
}

//! Calls `make()` (which returns the message, e.g. a std::string) and delivers it, only when level `l` is on: the
//! message costs nothing while the log is off. An exception from `make` drops the message. Never throws.
template <class Make>
void write_with(level l, Make&& make) noexcept {
  if (!enabled(l)) return;
  try {
    detail::deliver(l, std::forward<Make>(make)());
  } catch (...) {
  }
}

//! The threshold in force (after reading `CUASYNC_LOG` if nothing set one before).
level threshold() noexcept;

//! Sets the threshold; the sink stays. Overrides `CUASYNC_LOG`.
void set_threshold(level l) noexcept;

//! From now on messages go to `sink(level, message)` (empty: to stderr) at `threshold` (overriding `CUASYNC_LOG`).
//! Blocks until calls to the previous sink running on other threads have returned, so that once it returns the
//! previous sink is never called again and what it refers to may be freed; a call running on this thread (a sink that
//! calls set_sink) is not waited for. The previous sink is destroyed once no call uses it. @throws std::bad_alloc
void set_sink(sink_fn sink, level threshold);

//! The level `CUASYNC_LOG`'s text names: "info" (or "1"), "debug" (or "2"), "off" (or "0", or empty). Anything else
//! is nothing: the caller says what it accepts.
bool parse_level(std::string_view text, level& out) noexcept;

}  // namespace cuasync::logging
