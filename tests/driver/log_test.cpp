// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The log: levels, CUASYNC_LOG, the sink (what it receives, that replacing it waits for its running calls and never
// for the replacing thread's own), and the loader's line.
#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/log.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace logging = cuasync::logging;

namespace {

struct captured {
  std::mutex mutex;
  std::vector<std::pair<logging::level, std::string>> lines;
  void add(logging::level l, const char* m) {
    std::lock_guard lock(mutex);
    lines.emplace_back(l, m);
  }
};

// Restores stderr at the environment's threshold when a test ends, whatever it set.
struct sink_reset {
  logging::level before = logging::threshold();
  ~sink_reset() { logging::set_sink({}, before); }
};

}  // namespace

TEST_CASE("log levels parse and gate what is delivered", "[driver][log]") {
  sink_reset reset;
  logging::level l = logging::level::off;
  CHECK((logging::parse_level("debug", l) && l == logging::level::debug));
  CHECK((logging::parse_level("info", l) && l == logging::level::info));
  CHECK((logging::parse_level("1", l) && l == logging::level::info));
  CHECK((logging::parse_level("", l) && l == logging::level::off));
  CHECK_FALSE(logging::parse_level("loud", l));

  captured c;
  logging::set_sink([&c](logging::level lv, const char* m) { c.add(lv, m); }, logging::level::info);
  CHECK(logging::enabled(logging::level::info));
  CHECK_FALSE(logging::enabled(logging::level::debug));
  int built = 0;
  logging::write_with(logging::level::debug, [&] {
    ++built;
    return std::string("not built while debug is off");
  });
  CHECK(built == 0);
  logging::write(logging::level::info, "one");
  logging::write_with(logging::level::info, [] { return std::string("two"); });
  logging::set_threshold(logging::level::off);
  logging::write(logging::level::info, "not delivered");
  REQUIRE(c.lines.size() == 2);
  CHECK(c.lines[0] == std::pair{logging::level::info, std::string("one")});
  CHECK(c.lines[1].second == "two");
}

TEST_CASE("replacing the sink waits for its calls on other threads, not for the replacing one", "[driver][log]") {
  sink_reset reset;
  std::atomic<bool> inside{false}, release{false}, replaced{false};
  logging::set_sink(
      [&](logging::level, const char*) {
        inside = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      logging::level::info);
  std::thread logger([] { logging::write(logging::level::info, "held"); });
  while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread replacer([&] {
    logging::set_sink({}, logging::level::off);
    replaced = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(replaced.load());  // the previous sink is still running on `logger`
  release = true;
  replacer.join();
  logger.join();
  CHECK(replaced.load());

  // A sink that replaces itself from inside its call: set_sink does not wait for its own thread.
  int calls = 0;
  logging::set_sink(
      [&](logging::level, const char*) {
        ++calls;
        logging::set_sink({}, logging::level::off);
      },
      logging::level::info);
  logging::write(logging::level::info, "replaces itself");
  logging::write(logging::level::info, "after: off");
  CHECK(calls == 1);
}

TEST_CASE("cuda_error::cause is what() without the call site", "[driver][log]") {
  const cuasync::cuda_error e(cuasync::make_error_code(CUDA_ERROR_INVALID_VALUE), "cuSomething", "stream 0x1");
  CHECK_THAT(std::string(e.what()), Catch::Contains(" at log_test.cpp:"));
  const std::string cause = e.cause();  // "(invalid argument)" follows the name once a driver is loaded
  CHECK(cause.starts_with("cuSomething: CUDA_ERROR_INVALID_VALUE"));
  CHECK(cause.ends_with(" [stream 0x1]"));
  CHECK(std::string(e.what()).starts_with(cause + " at log_test.cpp:"));
}

// In the probe's child process (CUASYNC_TEST_LOG_SINK=1): a sink set before main, whose check for a GPU is the
// driver's first use.
namespace {
captured& early_lines() {
  static captured* c = new captured;
  return *c;
}
[[maybe_unused]] const bool early_sink = [] {
  if (std::getenv("CUASYNC_TEST_LOG_SINK"))
    logging::set_sink([](logging::level l, const char* m) { early_lines().add(l, m); }, logging::level::info);
  return true;
}();
}  // namespace

// Run by the tests below in a child process: the driver loaded with a sink set, or with CUASYNC_LOG to stderr.
TEST_CASE("log loader probe", "[.log_loader_probe]") {
  CUASYNC_CHILD_ONLY();
  captured& c = early_lines();
  try {
    cuasync::detail::driver();
  } catch (const cuasync::cuda_error&) {
  }
  try {
    cuasync::detail::driver();  // the remembered outcome: said once
  } catch (const cuasync::cuda_error&) {
  }
  for (const auto& [l, m] : c.lines) std::printf("SINK %s: %s\n", logging::to_string(l), m.c_str());
  SUCCEED();
}

TEST_CASE("the loader's outcome reaches the sink once, and stderr with CUASYNC_LOG=info", "[driver][log]") {
  auto r = cuasync::test::run_child({"log loader probe"},
                                    {"CUASYNC_LIBCUDA=/nonexistent/libcuda.so.1", "CUASYNC_TEST_LOG_SINK=1"},
                                    std::chrono::seconds(60));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string line = "SINK info: libcuda not loaded: dlopen: ";
  const std::size_t first = r.output.find(line);
  REQUIRE(first != std::string::npos);
  CHECK(r.output.find(line, first + 1) == std::string::npos);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/libcuda.so.1"));
  CHECK(r.output.find(".cpp:", first) == std::string::npos);  // a log line names no cuasync source line

  r = cuasync::test::run_child({"log loader probe"},
                               {"CUASYNC_LIBCUDA=/nonexistent/libcuda.so.1", "CUASYNC_LOG=info"},
                               std::chrono::seconds(60));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("cuasync: info: libcuda not loaded: dlopen: "));
  r = cuasync::test::run_child({"log loader probe"}, {"CUASYNC_LIBCUDA=/nonexistent/libcuda.so.1", "CUASYNC_LOG=loud"},
                               std::chrono::seconds(60));
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("CUASYNC_LOG=loud is not one of info, debug, off"));
  CHECK(r.output.find("libcuda not loaded") == std::string::npos);
}
