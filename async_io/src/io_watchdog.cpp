// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The io-thread watchdog: its thread, which posts the heartbeats and decides which threads are stalled, and where
// the reports go.
#include <cuasync/async_io/io_watchdog.hpp>

#include "watch_target.hpp"

#include <cuasync/trace/blocking_calls.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/thread_probe.hpp>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

using namespace std::chrono_literals;

namespace cuasync {
namespace {

// trace's watch bit stays on while any watchdog lives.
std::mutex watch_users_mutex;
int watch_users = 0;
void use_watch(bool more) noexcept {
  std::lock_guard lock(watch_users_mutex);
  watch_users += more ? 1 : -1;
  trace::set_watch(watch_users > 0);
}

// One thread's stall on one target, from its first report to its end.
struct stall {
  std::uint64_t thread = 0;
  std::string thread_name;
  std::int64_t start_ns = 0;
  std::string call;  // the last driver call seen in flight during it
  std::optional<trace::thread_times> before;  // the thread's accounting read last before it began
};

// The io threads' scheduler accounting, read every tick for the thread that ran the last heartbeat (the one a stall
// is blamed on), so that a stall's report can say how the thread spent it from just before it began.
constexpr std::size_t kept_readings = 16;
struct reading {
  std::uint64_t thread;
  trace::thread_times times;
};

struct watched {
  std::shared_ptr<detail::watch_target> target;
  std::vector<std::uint64_t> threads;  // the latest threads seen running its heartbeat, newest last
  std::vector<stall> stalls;
  std::deque<reading> readings;  // oldest first
};

void read_times(watched& w, std::uint64_t thread) {
  reading r{thread, {}};
  if (!thread || !trace::read_thread_times(thread, r.times)) return;
  if (w.readings.size() == kept_readings) w.readings.pop_front();
  w.readings.push_back(r);
}

// The thread's last reading at or before `ns`, else its first.
std::optional<trace::thread_times> reading_before(const watched& w, std::uint64_t thread, std::int64_t ns) {
  std::optional<trace::thread_times> found;
  for (const reading& r : w.readings) {
    if (r.thread != thread) continue;
    if (!found || r.times.at_ns <= ns) found = r.times;
    if (r.times.at_ns > ns) break;
  }
  return found;
}

// The latest threads seen running a target's heartbeats: an executor run by threads that come and go keeps a bounded
// list (each is looked up in trace's registry every tick).
constexpr std::size_t remembered_threads = 64;
void remember_thread(watched& w, std::uint64_t thread) {
  if (!thread || (!w.threads.empty() && w.threads.back() == thread)) return;
  std::erase(w.threads, thread);
  if (w.threads.size() == remembered_threads) w.threads.erase(w.threads.begin());
  w.threads.push_back(thread);
}

stall_report begun(const stall& s, std::int64_t now, const trace::call_in_flight* c) {
  stall_report r;
  r.thread = s.thread;
  r.duration = std::chrono::nanoseconds(now - s.start_ns);
  if (c) {
    r.thread_name = c->thread_name;
    r.call = c->call;
    r.where = c->where;
    r.frames = trace::describe_frames(c->frames);
    r.call_duration = std::chrono::nanoseconds(now - c->since_ns);
  }
  return r;
}

stall_report ended(const stall& s, std::int64_t end_ns) {
  stall_report r;
  r.thread = s.thread;
  r.thread_name = s.thread_name;
  r.call = s.call;
  r.duration = std::chrono::nanoseconds(std::max<std::int64_t>(0, end_ns - s.start_ns));
  r.ended = true;
  trace::thread_times after;
  if (s.before && trace::read_thread_times(s.thread, after) && after.at_ns > s.before->at_ns) {
    r.window = std::chrono::nanoseconds(after.at_ns - s.before->at_ns);
    r.on_cpu = std::chrono::nanoseconds(std::max<std::int64_t>(0, after.on_cpu_ns - s.before->on_cpu_ns));
    r.waiting_for_cpu = std::chrono::nanoseconds(std::max<std::int64_t>(0, after.waiting_ns - s.before->waiting_ns));
  }
  return r;
}

// A begun stall's probes, made outside the watchdog's lock: its state, and its stack when no driver call explains it
// (the thread answers the sampling signal when it next runs: give it a while, but never wait long).
void probe(stall_report& r, std::chrono::milliseconds threshold) {
  r.state = trace::describe_thread_state(r.thread);
  if (r.call.empty())
    r.stack = trace::describe_stack(trace::sample_stack(r.thread, std::clamp(threshold, 10ms, 100ms)));
}

void to_stderr(const stall_report& r) { std::fprintf(stderr, "cuasync watchdog: %s\n", r.text().c_str()); }

}  // namespace

struct io_watchdog::state {
  std::int64_t threshold_ns;
  sink report_to;
  std::mutex mutex;  // targets and stopping; held by the thread while it ticks, never while it reports
  std::condition_variable wake;
  bool stopping = false;
  std::vector<watched> targets;
  mutable std::mutex reports_mutex;
  std::deque<stall_report> kept;
  std::thread thread;

  void run();
  void tick(watched& w, std::int64_t now, std::vector<stall_report>& out);
  void deliver(const std::vector<stall_report>& out);
};

void io_watchdog::state::run() {
  const auto period = std::chrono::nanoseconds(std::max<std::int64_t>(threshold_ns / 4, 1'000'000));
  std::unique_lock lock(mutex);
  while (!stopping) {
    std::vector<stall_report> out;
    for (watched& w : targets) tick(w, trace::now_ns(), out);
    std::erase_if(targets, [](const watched& w) { return !w.target; });
    if (!out.empty()) {
      lock.unlock();
      for (stall_report& r : out)
        if (!r.ended) probe(r, std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::nanoseconds(threshold_ns)));
      deliver(out);
      // What the GPU and the streams were doing when the io thread stalled (trace/flight_recorder.hpp).
      for (const stall_report& r : out)
        if (!r.ended && trace::flight::enabled()) (void)trace::flight::dump("io thread stall: " + r.text());
      lock.lock();
    }
    wake.wait_for(lock, period, [&] { return stopping; });
  }
}

// One look at one target: post its heartbeat, then find its stalled threads — the one that ran the last heartbeat
// when the next is overdue, and any of its threads inside a driver call longer than the threshold.
void io_watchdog::state::tick(watched& w, std::int64_t now, std::vector<stall_report>& out) {
  const detail::watch_target::status status = w.target->beat(now);
  const detail::heartbeat_times& times = w.target->times();
  const std::int64_t posted = times.posted_ns.load(std::memory_order_acquire);
  const std::uint64_t ran_on = times.ran_on.load(std::memory_order_relaxed);
  remember_thread(w, ran_on);
  read_times(w, ran_on);
  const bool running = status == detail::watch_target::status::running;
  const bool overdue = running && posted != 0 && ran_on != 0 && now - posted > threshold_ns;

  struct look {
    std::uint64_t thread;
    bool has_call;
    trace::call_in_flight call;
  };
  std::vector<look> looks;
  bool any_blocked_call = false;
  for (std::uint64_t t : w.threads) {
    look l{t, false, {}};
    l.has_call = running && trace::call_of_thread(t, l.call);
    any_blocked_call |= l.has_call && now - l.call.since_ns > threshold_ns;
    looks.push_back(std::move(l));
  }
  for (look& l : looks) {
    const bool blocked_call = l.has_call && now - l.call.since_ns > threshold_ns;
    const bool blamed = overdue && !any_blocked_call && l.thread == ran_on;
    auto s = std::find_if(w.stalls.begin(), w.stalls.end(), [&](const stall& x) { return x.thread == l.thread; });
    if (blocked_call || blamed) {
      if (s != w.stalls.end()) {
        if (l.has_call) s->call = l.call.call;
        continue;
      }
      stall fresh{l.thread, l.has_call ? l.call.thread_name : "", std::numeric_limits<std::int64_t>::max(),
                  l.has_call ? l.call.call : "", std::nullopt};
      if (blocked_call) fresh.start_ns = l.call.since_ns;
      if (overdue) fresh.start_ns = std::min(fresh.start_ns, posted);
      fresh.before = reading_before(w, l.thread, fresh.start_ns);
      out.push_back(begun(fresh, now, l.has_call ? &l.call : nullptr));
      w.stalls.push_back(std::move(fresh));
    } else if (s != w.stalls.end()) {
      // Over: at the heartbeat that ran on this thread after it began, else about now (a tick's precision).
      const std::int64_t ran_ns = times.ran_ns.load(std::memory_order_relaxed);
      out.push_back(ended(*s, ran_on == l.thread && ran_ns > s->start_ns ? ran_ns : now));
      w.stalls.erase(s);
    }
  }
  if (status == detail::watch_target::status::gone) {
    for (const stall& s : w.stalls) out.push_back(ended(s, now));
    w.target.reset();  // erased by run()
  }
}

void io_watchdog::state::deliver(const std::vector<stall_report>& out) {
  {
    std::lock_guard lock(reports_mutex);
    for (const stall_report& r : out) {
      kept.push_back(r);
      if (kept.size() > kept_reports) kept.pop_front();
    }
  }
  for (const stall_report& r : out) {
    try {
      report_to ? report_to(r) : to_stderr(r);
    } catch (...) {
      // A sink that throws loses its report, not the watchdog.
    }
  }
}

io_watchdog::io_watchdog(std::chrono::milliseconds threshold, sink report_to)
    : threshold_(std::max(threshold, std::chrono::milliseconds(1))), state_(std::make_unique<state>()) {
  state_->threshold_ns = std::chrono::nanoseconds(threshold_).count();
  state_->report_to = std::move(report_to);
  use_watch(true);
  try {
    state_->thread = std::thread([s = state_.get()] { s->run(); });
  } catch (...) {
    use_watch(false);
    throw;
  }
}

io_watchdog::io_watchdog(boost::asio::io_context& io, std::chrono::milliseconds threshold, sink report_to)
    : io_watchdog(threshold, std::move(report_to)) {
  watch(io);
}

io_watchdog::~io_watchdog() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
  use_watch(false);
}

void io_watchdog::watch(boost::asio::io_context& io) { watch(boost::asio::any_io_executor(io.get_executor())); }

void io_watchdog::watch(const boost::asio::any_io_executor& ex) {
  auto target = detail::watch_target::of(ex);  // before our lock: it takes the context's service registry's
  // The first heartbeat now, so that it is queued before any handler posted after watch() (which may block at once).
  target->beat(trace::now_ns());
  std::lock_guard lock(state_->mutex);
  state_->targets.push_back(watched{std::move(target), {}, {}, {}});
}

std::vector<stall_report> io_watchdog::reports() const {
  std::lock_guard lock(state_->reports_mutex);
  return {state_->kept.begin(), state_->kept.end()};
}

std::chrono::milliseconds io_watchdog::environment_threshold() {
  static const std::chrono::milliseconds asked = [] {
    const char* text = std::getenv("CUASYNC_WATCHDOG_MS");
    if (!text || !*text) return std::chrono::milliseconds(0);
    char* end = nullptr;
    const long ms = std::strtol(text, &end, 10);
    return std::chrono::milliseconds(*end == '\0' && ms > 0 ? ms : 0);
  }();
  return asked;
}

std::unique_ptr<io_watchdog> io_watchdog::from_environment(boost::asio::io_context& io) {
  const std::chrono::milliseconds threshold = environment_threshold();
  if (threshold.count() == 0) return nullptr;
  return std::make_unique<io_watchdog>(io, threshold);
}

void io_watchdog::watch_if_asked(const boost::asio::any_io_executor& ex) {
  const std::chrono::milliseconds threshold = environment_threshold();
  if (threshold.count() == 0) return;
  static io_watchdog process_wide(threshold);  // joined at exit; contexts destroyed before it tell it so
  process_wide.watch(ex);
}

}  // namespace cuasync
