// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The thread probes (trace/thread_probe.hpp) on this machine's kernel: another thread's accounting, state and sampled
// stack while it computes and while it sleeps; nothing of unknown or finished threads; and sampling left off when the
// program handles the signal itself or asks for none (each in a child process: the signal is chosen once a process).
#include <cuasync/trace/blocking_calls.hpp>
#include <cuasync/trace/thread_probe.hpp>

#include "child_process.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

using namespace std::chrono_literals;
namespace trace = cuasync::trace;

// Outside any namespace and not inlined: the sampled stacks must name them.
std::atomic<int> thread_probe_test_mode{0};  // 0: compute, 1: sleep, 2: finish
[[gnu::noinline]] void thread_probe_test_spin() {
  while (thread_probe_test_mode.load() == 0) {
  }
}
[[gnu::noinline]] void thread_probe_test_sleep() {
  while (thread_probe_test_mode.load() == 1) std::this_thread::sleep_for(10ms);
}

namespace {

bool names(const std::vector<std::string>& frames, const std::string& function) {
  for (const std::string& f : frames)
    if (f.starts_with(function)) return true;
  return false;
}

// A registered thread that computes, then sleeps, as thread_probe_test_mode says.
struct probed_thread {
  std::atomic<std::uint64_t> ordinal{0};
  std::thread thread{[this] {
    trace::register_this_thread();
    ordinal = trace::this_thread_ordinal();
    thread_probe_test_spin();
    thread_probe_test_sleep();
  }};
  probed_thread() {
    thread_probe_test_mode = 0;
    while (ordinal == 0) std::this_thread::sleep_for(1ms);
  }
  ~probed_thread() {
    thread_probe_test_mode = 2;
    thread.join();
  }
};

}  // namespace

TEST_CASE("another thread's accounting, state and stack, while it computes and while it sleeps",
          "[trace][thread_probe]") {
  probed_thread t;
  trace::thread_times before, after;
  REQUIRE(trace::read_thread_times(t.ordinal, before));
  std::this_thread::sleep_for(200ms);
  REQUIRE(trace::read_thread_times(t.ordinal, after));
  CHECK(after.at_ns - before.at_ns >= 200'000'000);
  // Computing: on a CPU, or runnable and waiting for one on a loaded machine; never asleep for long.
  CHECK((after.on_cpu_ns - before.on_cpu_ns) + (after.waiting_ns - before.waiting_ns) >= 100'000'000);
  CHECK(trace::describe_thread_state(t.ordinal) == "running");
  const std::vector<std::string> computing = trace::describe_stack(trace::sample_stack(t.ordinal, 2s));
  INFO(computing.size() << " frames, the first: " << (computing.empty() ? "" : computing[0]));
  CHECK(names(computing, "thread_probe_test_spin"));

  thread_probe_test_mode = 1;
  std::this_thread::sleep_for(50ms);
  REQUIRE(trace::read_thread_times(t.ordinal, before));
  std::this_thread::sleep_for(200ms);
  REQUIRE(trace::read_thread_times(t.ordinal, after));
  CHECK(after.on_cpu_ns - before.on_cpu_ns < 100'000'000);
  // Asleep most of the time: caught between two sleeps (or waiting for a CPU after one) now and then: asked again.
  std::string state;
  for (int i = 0; i < 50 && !state.starts_with("asleep ("); ++i) {
    state = trace::describe_thread_state(t.ordinal);
    std::this_thread::sleep_for(3ms);
  }
  INFO("state: " << state);
  CHECK(state.starts_with("asleep ("));
  CHECK(state.find("sleep") != std::string::npos);  // clock_nanosleep or nanosleep
  const std::vector<std::string> sleeping = trace::describe_stack(trace::sample_stack(t.ordinal, 2s));
  CHECK(names(sleeping, "thread_probe_test_sleep"));
}

TEST_CASE("nothing is read of a thread that is unknown or has finished", "[trace][thread_probe]") {
  std::uint64_t gone = 0;
  {
    probed_thread t;
    gone = t.ordinal;
  }
  trace::thread_times times;
  CHECK_FALSE(trace::read_thread_times(gone, times));
  CHECK(trace::describe_thread_state(gone).empty());
  CHECK(trace::sample_stack(gone, 100ms).empty());
  CHECK_FALSE(trace::read_thread_times(~std::uint64_t{0}, times));
  CHECK(trace::sample_stack(~std::uint64_t{0}, 100ms).empty());
}

namespace {
std::atomic<int> own_handler_calls{0};
void own_handler(int) { own_handler_calls.fetch_add(1); }
}  // namespace

// Run in a child process by the test below (hidden: each needs a process whose sampling signal is not chosen yet).
TEST_CASE("thread probe child: the program's own handler of the sampling signal", "[.thread_probe_child_own]") {
  CUASYNC_CHILD_ONLY();
  struct sigaction sa {};
  sa.sa_handler = own_handler;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGRTMIN + 7, &sa, nullptr) == 0);
  probed_thread t;
  CHECK(trace::sample_stack(t.ordinal, 200ms).empty());
  struct sigaction now {};
  REQUIRE(sigaction(SIGRTMIN + 7, nullptr, &now) == 0);
  CHECK(now.sa_handler == own_handler);  // still the program's
  CHECK(own_handler_calls == 0);         // and never raised by the sampler
}

TEST_CASE("thread probe child: sampling asked off", "[.thread_probe_child_off]") {
  CUASYNC_CHILD_ONLY();
  probed_thread t;
  CHECK(trace::sample_stack(t.ordinal, 200ms).empty());
  trace::thread_times times;
  CHECK(trace::read_thread_times(t.ordinal, times));  // the accounting does not need the signal
  struct sigaction now {};
  REQUIRE(sigaction(SIGRTMIN + 7, nullptr, &now) == 0);
  CHECK(now.sa_handler == SIG_DFL);
}

TEST_CASE("sampling stays off when the program handles the signal itself, or CUASYNC_WATCHDOG_SIGNAL=0",
          "[trace][thread_probe]") {
  const auto own = cuasync::test::run_child({"[.thread_probe_child_own]"});
  INFO(own.output);
  CHECK(own.exit_code == 0);
  const auto off = cuasync::test::run_child({"[.thread_probe_child_off]"}, {"CUASYNC_WATCHDOG_SIGNAL=0"});
  INFO(off.output);
  CHECK(off.exit_code == 0);
}
