// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The test support's child runner: what a child that hangs leaves behind (the GPU machine has no debugger, so a
// hung child must say where it was before it is killed).
#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <chrono>
#include <thread>

TEST_CASE("hanging child", "[.hanging_child]") {
  CUASYNC_CHILD_ONLY();
  std::thread other([] { std::this_thread::sleep_for(std::chrono::seconds(60)); });
  std::this_thread::sleep_for(std::chrono::seconds(60));
  other.join();
}

TEST_CASE("a child that times out prints every thread's stack, then is killed", "[support]") {
  const auto start = std::chrono::steady_clock::now();
  const auto c = cuasync::test::run_child({"hanging child"}, {}, std::chrono::seconds(1));
  CHECK(c.timed_out);
  CHECK(c.exit_code == -9);  // SIGKILL
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  INFO(c.output);
  CHECK_THAT(c.output, Catch::Contains("the child timed out: its threads' stacks"));
  // Both threads answered with a stack of their own, naming the sleep they were in; with a driver loaded, its own
  // threads answer too (the H200's has one).
  std::size_t stacks = 0;
  for (std::size_t at = c.output.find("== thread "); at != std::string::npos; at = c.output.find("== thread ", at + 1))
    ++stacks;
  CHECK(stacks >= 2);
  CHECK_THAT(c.output, Catch::Contains("nanosleep") || Catch::Contains("sleep"));
}
