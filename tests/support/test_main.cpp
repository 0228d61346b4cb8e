// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The test main of every cuasync test executable. It finds out whether a driver and a device exist: without them
// it leaves out the [gpu] test cases and says how many and why; with them, everything runs. A crash prints the
// crashing thread's stack (the GPU machine has no debugger): Catch2 reports the signal first, then re-raises it here.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {
void print_stack(int sig) {
  static const char head[] = "\nfatal signal: the crashing thread's stack (addresses: addr2line -e <binary>)\n";
  (void)!::write(2, head, sizeof head - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// A child that timed out is sent this per thread by run_child (child_process.hpp) before it is killed: each thread
// prints its own stack, so a hang on the GPU machine says where it was.
void print_thread_stack(int) {
  char head[64];
  const int n = std::snprintf(head, sizeof head, "\n== thread %ld ==\n", static_cast<long>(::gettid()));
  (void)!::write(2, head, static_cast<std::size_t>(n));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
}
}  // namespace

// Here, not in the support library: benches link that library without Catch2's runtime.
bool cuasync::test::devices_at_least(int n) {
  const int have = cuasync::device::count();
  if (have >= n) return true;
  WARN("skipped: this test needs " << n << " devices, the machine has " << have);
  return false;
}

bool cuasync::test::simulated_or_skip() {
  if (simulated_driver_loaded()) return true;
  WARN("skipped: this case runs on the simulated driver only (tests/fake_driver: its gate kernel is a no-op on a GPU); "
       "the loaded driver is another. Run it through its CTest entry, which sets CUASYNC_LIBCUDA");
  return false;
}

bool cuasync::test::child_or_skip() {
  const char* v = std::getenv(child_variable);
  if (v && std::string_view(v) == "1") return true;
  WARN("skipped: this hidden case runs only in a child process that a test of this executable starts (it may fault "
       "the context or hang on purpose); a command-line filter matched it here");
  return false;
}

int main(int argc, char* argv[]) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, print_stack);
  {
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now, not inside a signal handler
    struct sigaction sa {};
    sa.sa_handler = print_thread_stack;
    sa.sa_flags = SA_RESTART;
    sigaction(cuasync::test::stack_signal, &sa, nullptr);
  }
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv)) return rc;

  std::string reason;
  if (!cuasync::test::gpu_available(&reason)) {
    std::size_t skipped = 0;
    for (const auto& tc : Catch::getAllTestCasesSorted(session.config()))
      if (!tc.isHidden())
        for (const auto& tag : tc.tags)
          if (tag == "gpu") ++skipped;
    // Catch2 ANDs a further argument with the filter before it. A filter also selects hidden tests, so with no
    // filter of the user's, hidden ones are excluded explicitly.
    auto& filters = session.configData().testsOrTags;
    if (filters.empty()) filters.push_back("~[.]");
    filters.push_back("~[gpu]");
    session.useConfigData(session.configData());
    std::printf("gpu: %zu test cases not run: %s\n", skipped, reason.c_str());
    std::fflush(stdout);
  }
  return session.run();
}
