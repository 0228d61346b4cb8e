// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "child_process.hpp"

#include <dirent.h>
#include <poll.h>
#include <sys/syscall.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace cuasync::test {

std::string self_path() {
  char buf[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(buf, static_cast<std::size_t>(n));
}

namespace {

// Asks every thread of a timed-out child (a test executable) for its stack (test_main.cpp prints it on
// stack_signal), with each thread's name: a hang on the GPU machine, which has no debugger, then says where it was.
void ask_for_stacks(pid_t pid, std::string& out) {
  out += "\n== the child timed out: its threads' stacks (addresses: addr2line -e <binary>) ==\n";
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (!dir) return;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const long tid = std::strtol(e->d_name, nullptr, 10);
    char name[64] = {};
    if (FILE* f = std::fopen((tasks + "/" + e->d_name + "/comm").c_str(), "r")) {
      if (!std::fgets(name, sizeof name, f)) name[0] = 0;
      std::fclose(f);
    }
    out += "thread " + std::to_string(tid) + ": " + name;
    ::syscall(SYS_tgkill, pid, tid, stack_signal);
    ::usleep(20000);  // one at a time: their lines do not interleave
  }
  ::closedir(dir);
}

}  // namespace

child_result run_child(std::vector<std::string> args, std::vector<std::string> env, std::chrono::seconds limit,
                       std::string program) {
  const bool own_executable = program.empty();
  if (own_executable) program = self_path();
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);

  std::vector<std::string> all_args{program};
  all_args.insert(all_args.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all_args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  env_strings.push_back(std::string(child_variable) + "=1");
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("posix_spawn failed: " + std::string(std::strerror(rc)));
  }
  child_result result;
  auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (!result.timed_out && own_executable) {
        result.timed_out = true;
        ask_for_stacks(pid, result.output);
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);  // read what they print
        continue;
      }
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

}  // namespace cuasync::test
