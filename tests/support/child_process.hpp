// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Runs this test executable again in a child process (posix_spawn of /proc/self/exe, never fork after CUDA was
// initialised: CUDA state does not survive fork), for tests that fault the context or need a fresh loader.
#include <chrono>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace cuasync::test {

struct child_result {
  int exit_code = -1;   //!< exit status, or -signal
  bool timed_out = false;
  std::string output;   //!< stdout and stderr together
};

//! Sent to each thread of a test executable's child that timed out: the test main's handler prints that thread's stack.
constexpr int stack_signal = SIGUSR2;

//! Runs `program` (default: this executable) with `args` and extra `env` ("NAME=value"), killing it after `limit`
//! (this executable: each of its threads first prints its stack into the output).
child_result run_child(std::vector<std::string> args, std::vector<std::string> env = {},
                       std::chrono::seconds limit = std::chrono::seconds(60), std::string program = {});

//! This executable's path.
std::string self_path();

//! Set to 1 in the environment of every child `run_child` starts: a hidden case meant to run only there (it faults
//! the context, hangs or needs a fresh loader) checks it, so no command-line filter can run it in the parent.
inline constexpr const char* child_variable = "CUASYNC_TEST_CHILD";

//! True in a child of `run_child`; otherwise a Catch2 warning says the case was skipped and why (defined in
//! test_main.cpp: test executables only).
bool child_or_skip();

}  // namespace cuasync::test

//! The first statement of a hidden case that a parent test runs in a child process (`run_child`). Catch2 2.x runs a
//! hidden case whenever a command-line filter matches it (`"~[timing]"` matches them all): run in the parent, a case
//! that faults the context on purpose would fail every later case. Elsewhere it returns at once, with a warning.
#define CUASYNC_CHILD_ONLY()                          \
  do {                                                \
    if (!::cuasync::test::child_or_skip()) return;    \
  } while (false)
