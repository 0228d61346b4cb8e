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

}  // namespace cuasync::test
