// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The blocked-call registry the io-thread watchdog reads: host_call publishes the calling thread's call while watching
// is on, nested calls restore the outer one, other threads read it, and describe_frames names the caller's frame.
#include <cuasync/trace/blocking_calls.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/hooks.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace trace = cuasync::trace;

namespace {

// Watching on for one test case; off again after it, whatever it leaves.
struct watching {
  watching() { trace::set_watch(true); }
  ~watching() { trace::set_watch(false); }
};

bool in_flight_here(trace::call_in_flight& out) { return trace::call_of_thread(trace::this_thread_ordinal(), out); }

}  // namespace

// Outside any namespace and not inlined, so that its frame carries this exported name (the test executable is built
// with ENABLE_EXPORTS, as a program that wants its frames named must be).
[[gnu::noinline]] std::vector<std::string> watchdog_fixture_blocking_caller() {
  trace::host_call c(trace::category::alloc, "cuMemFree");
  trace::call_in_flight seen;
  REQUIRE(in_flight_here(seen));
  return trace::describe_frames(seen.frames, 8);
}

TEST_CASE("with watching off a host_call publishes nothing", "[trace][watch]") {
  trace::host_call c(trace::category::sync, "cuStreamSynchronize");
  trace::call_in_flight seen;
  CHECK_FALSE(in_flight_here(seen));
  CHECK(trace::calls_in_flight().empty());
}

TEST_CASE("a host_call publishes its call, start time, caller's location and frames while it lasts", "[trace][watch]") {
  watching on;
  const std::int64_t before = trace::now_ns();
  const std::source_location where = std::source_location::current();
  {
    trace::host_call c(trace::category::alloc, "cuMemFree", 1 << 20, 0, &where);
    const std::int64_t after = trace::now_ns();
    trace::call_in_flight seen;
    REQUIRE(in_flight_here(seen));
    CHECK(std::string(seen.call) == "cuMemFree");
    CHECK(seen.thread == trace::this_thread_ordinal());
    CHECK(seen.since_ns >= before);
    CHECK(seen.since_ns <= after);
    CHECK(std::string(seen.where.file_name()) == where.file_name());
    CHECK(seen.where.line() == where.line());
    CHECK_FALSE(seen.frames.empty());
    REQUIRE(trace::calls_in_flight().size() == 1);
  }
  trace::call_in_flight seen;
  CHECK_FALSE(in_flight_here(seen));
  CHECK(trace::calls_in_flight().empty());
}

TEST_CASE("a nested host_call replaces the outer one and restores it when it ends", "[trace][watch]") {
  watching on;
  trace::host_call outer(trace::category::sync, "cuCtxSynchronize");
  trace::call_in_flight seen;
  {
    trace::host_call inner(trace::category::alloc, "cuMemFreeHost");
    REQUIRE(in_flight_here(seen));
    CHECK(std::string(seen.call) == "cuMemFreeHost");
  }
  REQUIRE(in_flight_here(seen));
  CHECK(std::string(seen.call) == "cuCtxSynchronize");
}

TEST_CASE("another thread's call in flight is read from here, and is gone when the call ends", "[trace][watch]") {
  watching on;
  std::atomic<bool> inside{false}, leave{false};
  std::atomic<std::uint64_t> ordinal{0};
  std::thread blocked([&] {
    ordinal = trace::this_thread_ordinal();
    trace::host_call c(trace::category::sync, "cuStreamSynchronize");
    inside = true;
    while (!leave) std::this_thread::yield();
  });
  while (!inside) std::this_thread::yield();
  trace::call_in_flight seen;
  REQUIRE(trace::call_of_thread(ordinal, seen));
  CHECK(std::string(seen.call) == "cuStreamSynchronize");
  CHECK(seen.thread == ordinal);
  CHECK(seen.thread != trace::this_thread_ordinal());
  const auto all = trace::calls_in_flight();
  REQUIRE(all.size() == 1);
  CHECK(all[0].thread == ordinal);
  leave = true;
  blocked.join();
  CHECK_FALSE(trace::call_of_thread(ordinal, seen));
  CHECK(trace::calls_in_flight().empty());
}

TEST_CASE("describe_frames names the caller's exported frame and leaves out the standard library's", "[trace][watch]") {
  watching on;
  // Through a std::function: its _M_invoke frame is the standard library's and must not be named.
  const std::function<std::vector<std::string>()> through_std = watchdog_fixture_blocking_caller;
  const std::vector<std::string> named = through_std();
  REQUIRE_FALSE(named.empty());
  INFO(named[0]);
  CHECK(named[0].find("watchdog_fixture_blocking_caller") == 0);
  CHECK(named[0].find(" at ") != std::string::npos);
  for (const std::string& frame : named) {
    INFO(frame);
    CHECK(frame.find("std::") != 0);
    CHECK(frame.find("cuasync::") == std::string::npos);
    CHECK(frame.find("_Function_handler") == std::string::npos);
  }
}
