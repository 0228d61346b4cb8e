// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder's switch and watch thread: the environment, the stall check (an operation in flight longer
// than the threshold on a stream that says it is still busy), the dumps a fault or a signal asks for, and the dump
// files.
#include "flight_state.hpp"

#include <cuasync/trace/clock.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

namespace cuasync::trace::flight {
namespace {

struct watcher {
  std::mutex mutex;  // options, the thread, the signal; and one dump at a time (dump_mutex)
  std::mutex dump_mutex;
  options opts;
  std::thread thread;
  sem_t wake;
  std::atomic<bool> stopping{false};
  std::atomic<bool> signal_pending{false};
  std::atomic<bool> fault_pending{false};
  std::atomic<bool> running{false};
  int installed_signal = 0;
  struct sigaction previous {};
  dump_result last;
  watcher() { sem_init(&wake, 0, 0); }
};
watcher& the_watcher() {
  static watcher* w = new watcher;  // never destroyed: a signal may come during static destruction
  return *w;
}

void on_signal(int) {
  watcher& w = the_watcher();
  w.signal_pending.store(true, std::memory_order_relaxed);
  sem_post(&w.wake);  // async-signal-safe
}

std::string signal_name(int sig) {
  const char* d = sigdescr_np(sig);
  return "signal " + std::to_string(sig) + (d ? std::string(" (") + d + ")" : std::string());
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

long number(const char* name, long fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 ? n : fallback;
}

std::string what_of(const entry& e) { return e.name.empty() ? e.call : e.call + " " + e.name; }

std::string where_of(const stream_history& h) {
  std::string s = "stream 0x";
  char b[20];
  std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(h.handle));
  s += b;
  if (h.identity.stream_id) s += " (id " + std::to_string(h.identity.stream_id) + ")";
  if (h.identity.device >= 0) s += " on device " + std::to_string(h.identity.device);
  return s;
}

const entry* first_open(const stream_history& h) {
  for (const entry& e : h.entries)
    if (!e.done && e.state != status::failed) return &e;
  return nullptr;
}

std::string site_of(const entry& e) {
  return e.file.empty() ? "" : ", issued from " + e.file + ":" + std::to_string(e.line);
}

// The stall check: the rings whose oldest open operation is older than the threshold, their streams asked (the
// registry's lock held, so that no ring is recycled meanwhile; writers never take it). Reasons to dump are returned.
std::vector<std::string> check_stalls(std::int64_t threshold_ns) {
  std::vector<std::string> reasons;
  registry& reg = the_registry();
  std::lock_guard lock(reg.mutex);
  const std::int64_t now = now_ns();
  for (const auto& p : reg.rings) {
    ring& r = *p;
    if (r.retired.load(std::memory_order_relaxed) || r.fault_seq.load(std::memory_order_relaxed)) continue;
    const std::uint64_t last = r.next.load(std::memory_order_acquire);
    if (last <= r.done_up_to.load(std::memory_order_relaxed)) continue;
    const stream_history h = read_ring(r);
    const entry* open = first_open(h);
    if (!open || now - open->issued_ns < threshold_ns || open->seq == r.stall_dumped_seq) continue;
    void* stream = r.stream.load(std::memory_order_relaxed);
    const int verdict = r.identity.probe ? r.identity.probe(stream) : 1;
    if (verdict == 0) {
      // Idle: everything enqueued up to `last` is done (an operation still inside its driver call is not).
      std::uint64_t upto = 0;
      for (const entry& e : h.entries) {
        if (e.seq > last || e.state == status::issuing) break;
        upto = e.seq;
      }
      seen_done({&r, upto});
      continue;
    }
    r.stall_dumped_seq = open->seq;
    if (verdict != 1) {
      r.fault_dumped_seq = open->seq;  // dumped here, not again by faults_to_dump
      r.fault_seq.store(open->seq, std::memory_order_relaxed);
      r.fault_result.store(verdict, std::memory_order_relaxed);
      reasons.push_back("device fault: " + where_of(h) + " reports CUresult " + std::to_string(verdict) +
                        " with `" + what_of(*open) + "` (#" + std::to_string(open->seq) + ") not seen done" +
                        site_of(*open));
      continue;
    }
    reasons.push_back("GPU stall: `" + what_of(*open) + "` (#" + std::to_string(open->seq) + ") has been in flight on " +
                      where_of(h) + " for " + std::to_string((now - open->issued_ns) / 1'000'000) +
                      " ms and the stream is still busy" + site_of(*open));
  }
  return reasons;
}

std::vector<std::string> faults_to_dump() {
  std::vector<std::string> reasons;
  registry& reg = the_registry();
  std::lock_guard lock(reg.mutex);
  for (const auto& p : reg.rings) {
    ring& r = *p;
    const std::uint64_t seq = r.fault_seq.load(std::memory_order_relaxed);
    if (!seq || r.fault_dumped_seq == seq) continue;
    r.fault_dumped_seq = seq;
    const stream_history h = read_ring(r);
    const char* name = r.fault_name.load(std::memory_order_relaxed);
    std::string reason = "device fault: " + std::string(name ? name : "an error") + " (CUresult " +
                         std::to_string(r.fault_result.load(std::memory_order_relaxed)) + ") on " + where_of(h);
    if (const entry* open = first_open(h))
      reason += ", with `" + what_of(*open) + "` (#" + std::to_string(open->seq) + ") the first not seen done" +
                site_of(*open);
    reasons.push_back(std::move(reason));
  }
  return reasons;
}

void run(watcher& w) {
  std::int64_t next_calibration = now_ns() + 50'000'000;
  while (!w.stopping.load(std::memory_order_relaxed)) {
    std::int64_t stall_ns;
    bool faults;
    {
      std::lock_guard lock(w.mutex);
      stall_ns = std::chrono::nanoseconds(w.opts.stall).count();
      faults = w.opts.dump_on_fault;
    }
    const std::int64_t period = std::clamp<std::int64_t>(stall_ns / 4, 5'000'000, 1'000'000'000);
    timespec deadline{};
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += period % 1'000'000'000;
    deadline.tv_sec += period / 1'000'000'000 + deadline.tv_nsec / 1'000'000'000;
    deadline.tv_nsec %= 1'000'000'000;
    while (sem_clockwait(&w.wake, CLOCK_MONOTONIC, &deadline) != 0 && errno == EINTR) {
    }
    if (w.stopping.load(std::memory_order_relaxed)) break;
    if (now_ns() > next_calibration) {
      calibrate_clock();
      next_calibration = now_ns() + 1'000'000'000;
    }
    if (w.signal_pending.exchange(false, std::memory_order_relaxed)) {
      int sig;
      {
        std::lock_guard lock(w.mutex);
        sig = w.installed_signal;
      }
      (void)dump("asked for by " + signal_name(sig));
    }
    if (w.fault_pending.exchange(false, std::memory_order_relaxed) && faults)
      for (std::string& r : faults_to_dump()) (void)dump(std::move(r));
    if (stall_ns > 0) {
      std::vector<std::string> reasons;
      try {
        reasons = check_stalls(stall_ns);
      } catch (...) {
      }
      for (std::string& r : reasons) (void)dump(std::move(r));
    }
  }
}

std::uint32_t ring_length(std::uint32_t asked) {
  if (asked < 8 || asked > 65536)
    throw std::invalid_argument("cuasync flight recorder: per_stream must be 8 .. 65536, not " + std::to_string(asked));
  return std::bit_ceil(asked);
}

bool write_file(const std::string& path, const std::string& body) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << body;
  return static_cast<bool>(f.flush());
}

}  // namespace

void fault_seen(ring&) noexcept {
  watcher& w = the_watcher();
  if (!w.running.load(std::memory_order_relaxed)) return;
  w.fault_pending.store(true, std::memory_order_relaxed);
  sem_post(&w.wake);
}

options environment_options(bool& asked) {
  options o;
  const long n = number("CUASYNC_FLIGHT", 0);
  asked = n > 0;
  if (n > 1) o.per_stream = static_cast<std::uint32_t>(std::clamp<long>(n, 8, 65536));
  o.stall = std::chrono::milliseconds(number("CUASYNC_FLIGHT_STALL_MS", o.stall.count()));
  if (const char* d = env("CUASYNC_FLIGHT_DIR")) o.directory = d;
  o.signal = static_cast<int>(number("CUASYNC_FLIGHT_SIGNAL", o.signal));
  return o;
}

void enable(const options& o) {
  const std::uint32_t length = ring_length(o.per_stream);
  if (o.signal < 0 || o.signal >= NSIG)
    throw std::invalid_argument("cuasync flight recorder: no signal " + std::to_string(o.signal));
  watcher& w = the_watcher();
  std::lock_guard lock(w.mutex);
  {
    registry& reg = the_registry();
    std::lock_guard rl(reg.mutex);
    reg.length = length;
  }
  w.opts = o;
  w.opts.per_stream = length;
  if (w.installed_signal != o.signal) {
    if (w.installed_signal) sigaction(w.installed_signal, &w.previous, nullptr);
    w.installed_signal = 0;
    struct sigaction now {};
    if (o.signal && sigaction(o.signal, nullptr, &now) == 0 && now.sa_handler == SIG_DFL &&
        !(now.sa_flags & SA_SIGINFO)) {
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      if (sigaction(o.signal, &sa, &w.previous) == 0) w.installed_signal = o.signal;
    }
  }
  if (!w.thread.joinable()) {
    w.stopping.store(false, std::memory_order_relaxed);
    calibrate_clock();
    w.thread = std::thread([&w] { run(w); });
    w.running.store(true, std::memory_order_relaxed);
  } else {
    sem_post(&w.wake);  // the new threshold now
  }
  set_flight(true);
}

void enable_from_environment() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      bool asked = false;
      const options o = environment_options(asked);
      if (asked) enable(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cuasync: CUASYNC_FLIGHT: the flight recorder could not start: %s\n", e.what());
    }
  });
}

void disable() noexcept {
  set_flight(false);
  watcher& w = the_watcher();
  std::thread stopped;
  {
    std::lock_guard lock(w.mutex);
    if (w.installed_signal) sigaction(w.installed_signal, &w.previous, nullptr);
    w.installed_signal = 0;
    w.stopping.store(true, std::memory_order_relaxed);
    w.running.store(false, std::memory_order_relaxed);
    stopped = std::move(w.thread);
  }
  sem_post(&w.wake);
  if (stopped.joinable()) stopped.join();  // outside the lock: the thread takes it
}

dump_result dump(std::string reason) noexcept {
  watcher& w = the_watcher();
  dump_result out;
  try {
    options o;
    {
      std::lock_guard lock(w.mutex);
      o = w.opts;
    }
    std::lock_guard one(w.dump_mutex);
    const snapshot s = take(std::move(reason));
    out.text = text(s);
    const std::uint64_t n = the_registry().dumps.fetch_add(1, std::memory_order_relaxed) + 1;
    std::string base = o.directory.empty() ? std::string() : o.directory + "/";
    base += "cuasync-flight-" + std::to_string(s.pid) + "-" + std::to_string(n);
    if (write_file(base + ".txt", out.text)) out.text_path = base + ".txt";
    if (write_file(base + ".json", chrome_json(s))) out.json_path = base + ".json";
    if (o.to_stderr) {
      std::string tail = out.json_path.empty() ? "  (the dump files could not be written in " +
                                                     (o.directory.empty() ? std::string(".") : o.directory) + ")\n"
                                               : "  written to " + out.text_path + " and " + out.json_path +
                                                     " (Chrome trace JSON: Perfetto opens it)\n";
      std::fprintf(stderr, "%s%s", out.text.c_str(), tail.c_str());
    }
    w.last = out;
  } catch (...) {
    // A dump that cannot be made (no memory) is lost; the process goes on.
  }
  return out;
}

std::uint64_t dumps() noexcept { return the_registry().dumps.load(std::memory_order_relaxed); }

dump_result last_dump() {
  watcher& w = the_watcher();
  std::lock_guard one(w.dump_mutex);
  return w.last;
}

}  // namespace cuasync::trace::flight
