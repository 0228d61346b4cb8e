// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The log's threshold and sink. The sink is called with no lock held: a call copies the sink under the mutex and counts
// itself as running on it, so that set_sink can wait for the previous sink's calls without holding anything they need.
#include <cuasync/log.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace cuasync::logging {

namespace detail {
std::atomic<int> threshold{-1};
}  // namespace detail

namespace {

struct sink_slot {
  sink_fn fn;
  unsigned running = 0;  // calls in progress, under `state().mutex`
};

struct sink_state {
  std::mutex mutex;
  std::condition_variable idle;
  std::shared_ptr<sink_slot> current = std::make_shared<sink_slot>();
};

sink_state& state() {
  static sink_state* s = new sink_state;  // never destroyed: threads may log during the process's exit
  return *s;
}

// The sinks this thread is inside of (a sink that logs, or that calls set_sink).
thread_local std::vector<const sink_slot*> inside;

void to_stderr(level l, std::string_view message) noexcept {
  try {
    // One write per line, so that lines of several threads do not interleave.
    std::string line = std::string("cuasync: ") + to_string(l) + ": ";
    line.append(message).push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
  } catch (...) {
  }
}

}  // namespace

const char* to_string(level l) noexcept {
  switch (l) {
    case level::off: return "off";
    case level::info: return "info";
    case level::debug: return "debug";
  }
  return "?";
}

bool parse_level(std::string_view text, level& out) noexcept {
  if (text.empty() || text == "off" || text == "0") out = level::off;
  else if (text == "info" || text == "1") out = level::info;
  else if (text == "debug" || text == "2") out = level::debug;
  else return false;
  return true;
}

int detail::read_environment() noexcept {
  level l = level::off;
  const char* env = std::getenv("CUASYNC_LOG");
  const bool known = parse_level(env ? env : "", l);
  int expected = -1;
  if (threshold.compare_exchange_strong(expected, static_cast<int>(l), std::memory_order_relaxed) && !known)
    std::fprintf(stderr, "cuasync: CUASYNC_LOG=%s is not one of info, debug, off: the log stays off\n", env);
  return threshold.load(std::memory_order_relaxed);
}

void detail::deliver(level l, std::string_view message) noexcept {
  sink_state& s = state();
  std::shared_ptr<sink_slot> slot;
  try {
    std::lock_guard lock(s.mutex);
    if (s.current->fn) {
      slot = s.current;
      ++slot->running;
    }
  } catch (...) {
    return;
  }
  // A sink that logs, a few levels deep, is served; deeper (a sink that logs whenever it is called) goes to stderr.
  if (!slot || inside.size() >= 4) {
    if (slot) {
      std::lock_guard lock(s.mutex);
      --slot->running;
      s.idle.notify_all();
    }
    to_stderr(l, message);
    return;
  }
  try {
    const std::string text(message);  // NUL-terminated for C
    inside.push_back(slot.get());
    struct leave {
      ~leave() { inside.pop_back(); }
    } on_return;
    slot->fn(l, text.c_str());
  } catch (...) {  // the sink's own exception, or no memory for the message: dropped
  }
  std::lock_guard lock(s.mutex);
  --slot->running;
  s.idle.notify_all();
}

level threshold() noexcept {
  enabled(level::off);  // reads the environment if nothing did
  return static_cast<level>(detail::threshold.load(std::memory_order_relaxed));
}

void set_threshold(level l) noexcept { detail::threshold.store(static_cast<int>(l), std::memory_order_relaxed); }

void set_sink(sink_fn sink, level l) {
  sink_state& s = state();
  auto fresh = std::make_shared<sink_slot>();
  fresh->fn = std::move(sink);
  std::unique_lock lock(s.mutex);
  std::shared_ptr<sink_slot> previous = std::exchange(s.current, std::move(fresh));
  detail::threshold.store(static_cast<int>(l), std::memory_order_relaxed);
  const auto mine = static_cast<unsigned>(std::count(inside.begin(), inside.end(), previous.get()));
  s.idle.wait(lock, [&] { return previous->running <= mine; });
}

}  // namespace cuasync::logging
