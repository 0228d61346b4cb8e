// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The io-thread watchdog without a GPU: stalls inside a driver call (a trace::host_call standing in for cuMemFree)
// and without one are reported once each, with their end; a clean context is never reported; stopped and destroyed
// contexts, a strand, two contexts, and a watchdog destroyed mid-stall.
// [timing]: wall-clock stalls against thresholds of 50 ms (200 ms where silence is asserted), with wide margins.
#include <cuasync/async_io/io_watchdog.hpp>

#include <cuasync/trace/blocking_calls.hpp>
#include <cuasync/trace/hooks.hpp>

#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using cuasync::io_watchdog;
using cuasync::stall_report;
using cuasync::test::eventually;
namespace trace = cuasync::trace;

namespace {

constexpr auto threshold = 50ms;
constexpr auto quiet_threshold = 200ms;  // where silence is asserted: a loaded VM's scheduling delays stay below it
const io_watchdog::sink quiet = [](const stall_report&) {};

// An io_context run by a thread of its own until stop().
struct io_thread {
  asio::io_context& io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{io.get_executor()};
  std::atomic<std::uint64_t> ordinal{0};
  std::thread thread{[this] { io.run(); }};

  explicit io_thread(asio::io_context& c) : io(c) {
    asio::post(io, [this] { ordinal = trace::this_thread_ordinal(); });
  }
  ~io_thread() { stop(); }
  void stop() {
    work.reset();
    if (thread.joinable()) thread.join();
  }
};

// A stall: its first report and, once over, its last. A loaded machine may add stalls of its own (an io thread not
// scheduled for a threshold), so tests look for theirs instead of counting every report.
struct stall {
  stall_report begun;
  std::optional<stall_report> ended;
};
std::vector<stall> stalls(const io_watchdog& w) {
  std::vector<stall> out;
  for (const stall_report& r : w.reports()) {
    if (!r.ended) {
      out.push_back({r, std::nullopt});
      continue;
    }
    for (stall& s : out)
      if (!s.ended && s.begun.thread == r.thread) {
        s.ended = r;
        break;
      }
  }
  return out;
}
// The stalls whose first report names `call`.
std::vector<stall> stalls_in(const io_watchdog& w, const std::string& call) {
  std::vector<stall> all = stalls(w);
  std::erase_if(all, [&](const stall& s) { return s.begun.call != call; });
  return all;
}
bool ended_in(const io_watchdog& w, const std::string& call) {
  const std::vector<stall> in = stalls_in(w, call);
  return !in.empty() && in[0].ended;
}

void busy_for(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace

// Outside any namespace and not inlined: its exported name is the frame the report must name.
[[gnu::noinline]] void watchdog_test_free_on_io_thread(std::chrono::milliseconds blocked_for) {
  static const std::source_location where = std::source_location::current();
  trace::host_call c(trace::category::alloc, "cuMemFree", 1 << 20, 0, &where);
  std::this_thread::sleep_for(blocked_for);
}

TEST_CASE("a handler blocked in cuMemFree is reported once with the call, its caller and frame, then its end",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(io, threshold);  // the default sink: the lines go to standard error
  io_thread runner(io);
  asio::post(io, [] { watchdog_test_free_on_io_thread(400ms); });
  REQUIRE(eventually([&] { return ended_in(w, "cuMemFree"); }));
  const std::vector<stall> in_free = stalls_in(w, "cuMemFree");
  REQUIRE(in_free.size() == 1);  // once per stall
  const stall_report& first = in_free[0].begun;
  INFO(first.text());
  CHECK(first.thread == runner.ordinal);
  CHECK(std::string(first.where.file_name()).ends_with("watchdog_test.cpp"));
  CHECK(std::string(first.where.function_name()).find("watchdog_test_free_on_io_thread") != std::string::npos);
  REQUIRE_FALSE(first.frames.empty());
  CHECK(first.frames[0].find("watchdog_test_free_on_io_thread") == 0);
  CHECK(first.duration >= threshold);
  CHECK(first.text().find("in cuMemFree for") != std::string::npos);
  const stall_report& last = *in_free[0].ended;
  INFO(last.text());
  CHECK(last.thread == runner.ordinal);
  CHECK(last.call == "cuMemFree");
  CHECK(last.duration >= 350ms);
  CHECK(last.duration < 5s);
}

TEST_CASE("a handler that runs without yielding and without a driver call is reported as such",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(io, threshold);  // the default sink, as docs/tracing.md shows
  io_thread runner(io);
  asio::post(io, [] { busy_for(300ms); });
  // The busy handler's stall: from the overdue heartbeat's post, up to a late tick after its start.
  const auto busy_stall = [&]() -> std::optional<stall> {
    for (const stall& s : stalls_in(w, ""))
      if (s.ended && s.ended->duration >= 150ms) return s;
    return std::nullopt;
  };
  REQUIRE(eventually([&] { return busy_stall().has_value(); }));
  const stall s = *busy_stall();
  INFO(s.begun.text());
  CHECK(s.begun.thread == runner.ordinal);
  CHECK(s.begun.text().find("without yielding (no driver call in flight)") != std::string::npos);
  CHECK(s.ended->text().find("no driver call was in flight") != std::string::npos);
}

// Outside any namespace and not inlined: the sampled stack must name them.
// Each keeps its frame while it runs (no tail call: with busy_for a call in tail position, ASan builds jumped to it).
[[gnu::noinline]] void watchdog_test_spin(std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}
[[gnu::noinline]] void watchdog_test_sleep(std::chrono::milliseconds d) {
  std::this_thread::sleep_for(d);
  asm volatile("" ::: "memory");
}

namespace {
bool names(const std::vector<std::string>& frames, const std::string& function) {
  for (const std::string& f : frames)
    if (f.starts_with(function)) return true;
  return false;
}
// The first stall without a driver call that lasted at least `at_least`, once it has ended.
std::optional<stall> ended_stall_without_call(const io_watchdog& w, std::chrono::milliseconds at_least) {
  for (const stall& s : stalls_in(w, ""))
    if (s.ended && s.ended->duration >= at_least) return s;
  return std::nullopt;
}
}  // namespace

TEST_CASE("a handler computing without a driver call: its stack is sampled, and the end says it was on a CPU",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(io, threshold, quiet);
  io_thread runner(io);
  asio::post(io, [] { watchdog_test_spin(400ms); });
  REQUIRE(eventually([&] { return ended_stall_without_call(w, 250ms).has_value(); }));
  const stall s = *ended_stall_without_call(w, 250ms);
  INFO(s.begun.text());
  INFO(s.ended->text());
  CHECK(s.begun.state == "running");
  CHECK(names(s.begun.stack, "watchdog_test_spin"));
  CHECK(s.begun.text().find("; stack: ") != std::string::npos);
  // The kernel's accounting: the window covers the stall, most of it on a CPU (or waiting for one on a loaded
  // machine), little of it asleep.
  REQUIRE(s.ended->window >= s.ended->duration - threshold);
  CHECK(s.ended->on_cpu + s.ended->waiting_for_cpu >= s.ended->window / 2);
  CHECK(s.ended->on_cpu >= 20ms);  // a share of the 400 ms spin, even on a machine with 8 threads per core
  CHECK(s.ended->text().find(" on a CPU, ") != std::string::npos);
}

TEST_CASE("a handler asleep without a driver call: its state names the system call, and the end says it slept",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(io, threshold, quiet);
  io_thread runner(io);
  asio::post(io, [] { watchdog_test_sleep(400ms); });
  REQUIRE(eventually([&] { return ended_stall_without_call(w, 250ms).has_value(); }));
  const stall s = *ended_stall_without_call(w, 250ms);
  INFO(s.begun.text());
  INFO(s.ended->text());
  CHECK(s.begun.state.starts_with("asleep ("));
  CHECK(s.begun.state.find("sleep") != std::string::npos);  // clock_nanosleep or nanosleep
  CHECK(names(s.begun.stack, "watchdog_test_sleep"));
  REQUIRE(s.ended->window >= s.ended->duration - threshold);
  CHECK(s.ended->on_cpu < 100ms);
  CHECK(s.ended->text().find("ms asleep") != std::string::npos);
}

TEST_CASE("an io_context running many short handlers and timers is never reported", "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(io, quiet_threshold, quiet);
  std::atomic<int> handlers{0};
  asio::steady_timer timer(io);
  std::function<void()> next = [&] {
    if (++handlers % 100 == 0) {
      timer.expires_after(1ms);
      timer.async_wait([&](boost::system::error_code) { next(); });
    } else if (handlers < 100'000) {
      asio::post(io, next);
    }
  };
  asio::post(io, next);
  const auto end = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < end) io.run_for(50ms);
  CHECK(handlers > 1000);
  CHECK(w.reports().empty());
}

TEST_CASE("a stopped io_context is not stalled, a restarted one neither, and a destroyed one is forgotten",
          "[async_io][watchdog][timing]") {
  auto io = std::make_unique<asio::io_context>();
  io_watchdog w(*io, quiet_threshold, quiet);
  {
    io_thread runner(*io);
    REQUIRE(eventually([&] { return runner.ordinal != 0; }));
    io->stop();
  }
  std::this_thread::sleep_for(2 * quiet_threshold);  // heartbeats queued in a stopped context
  CHECK(w.reports().empty());
  io->restart();
  {
    io_thread runner(*io);
    std::this_thread::sleep_for(2 * quiet_threshold);
  }
  CHECK(w.reports().empty());
  io.reset();  // destroyed while watched: its heartbeats are dropped and the watchdog forgets it
  std::this_thread::sleep_for(2 * quiet_threshold);
  CHECK(w.reports().empty());
}

TEST_CASE("a watched executor that tracks work keeps none, and its io_context is not stalled once run() returned",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  io_watchdog w(quiet_threshold, quiet);
  w.watch(asio::any_io_executor(asio::prefer(io.get_executor(), asio::execution::outstanding_work.tracked)));
  std::thread runner([&] { io.run(); });
  runner.join();  // returns: the watchdog holds no work (the queued heartbeat runs, then run() is out of work)
  std::this_thread::sleep_for(2 * quiet_threshold);
  CHECK(w.reports().empty());
}

TEST_CASE("a watchdog destroyed during a stall stops at once; the stalled handler is left alone",
          "[async_io][watchdog][timing]") {
  asio::io_context io;
  std::atomic<bool> release{false};
  io_thread runner(io);
  auto w = std::make_unique<io_watchdog>(io, threshold, quiet);
  asio::post(io, [&] {
    trace::host_call c(trace::category::sync, "cuStreamSynchronize");
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (!release && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  });
  REQUIRE(eventually([&] { return !stalls_in(*w, "cuStreamSynchronize").empty(); }));
  const auto before = std::chrono::steady_clock::now();
  w.reset();
  CHECK(std::chrono::steady_clock::now() - before < 2s);
  CHECK_FALSE(release);  // the handler still blocks: destruction did not wait for it
  release = true;
  runner.stop();
}

TEST_CASE("two io_contexts: only the stalled one's thread is reported", "[async_io][watchdog][timing]") {
  asio::io_context blocked, free;
  io_watchdog w(threshold, quiet);
  w.watch(blocked);
  w.watch(free);
  io_thread blocked_runner(blocked), free_runner(free);
  asio::post(blocked, [] {
    trace::host_call c(trace::category::sync, "cuEventSynchronize");
    std::this_thread::sleep_for(300ms);
  });
  REQUIRE(eventually([&] { return ended_in(w, "cuEventSynchronize"); }));
  blocked_runner.stop();
  free_runner.stop();
  CHECK(stalls_in(w, "cuEventSynchronize").size() == 1);
  for (const stall& s : stalls(w)) {
    INFO(s.begun.text());
    if (!s.begun.call.empty()) CHECK(s.begun.thread == blocked_runner.ordinal);
    if (s.begun.thread == free_runner.ordinal) CHECK(s.begun.call.empty());  // only ever a late schedule
  }
}

TEST_CASE("a watched strand blocked in a handler is reported; its context may go first",
          "[async_io][watchdog][timing]") {
  io_watchdog w(threshold, quiet);
  {
    asio::io_context io;
    auto strand = asio::make_strand(io);
    w.watch(strand);
    io_thread runner(io);
    asio::post(strand, [] { watchdog_test_free_on_io_thread(300ms); });
    REQUIRE(eventually([&] { return ended_in(w, "cuMemFree"); }));
  }  // the context goes before the watchdog, with the strand the watchdog holds
  std::this_thread::sleep_for(2 * threshold);
}

TEST_CASE("from_environment gives no watchdog when CUASYNC_WATCHDOG_MS is not set", "[async_io][watchdog]") {
  if (std::getenv("CUASYNC_WATCHDOG_MS")) return;  // set: the process-wide watchdog is another test's business
  asio::io_context io;
  CHECK(io_watchdog::environment_threshold() == 0ms);
  CHECK(io_watchdog::from_environment(io) == nullptr);
}

TEST_CASE("watching is published only while a watchdog lives", "[async_io][watchdog]") {
  if (std::getenv("CUASYNC_WATCHDOG_MS")) return;  // set: the process-wide watchdog keeps it on
  CHECK((trace::active_hooks() & trace::hook::watch) == 0);
  {
    io_watchdog a(threshold, quiet);
    {
      io_watchdog b(threshold, quiet);
      CHECK((trace::active_hooks() & trace::hook::watch) != 0);
    }
    CHECK((trace::active_hooks() & trace::hook::watch) != 0);
  }
  CHECK((trace::active_hooks() & trace::hook::watch) == 0);
}
