#include "child_process.hpp"

#include <poll.h>
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

// Where CUASYNC_TEST_HANG_STACKS is set (the GPU scripts), a hung child's threads' stacks, from gdb if it exists:
// a timeout on the GPU machine then says where it hung.
void append_stacks(pid_t pid, std::string& out) {
  const char* wanted = std::getenv("CUASYNC_TEST_HANG_STACKS");
  if (!wanted || !*wanted) return;
  const std::string cmd = "timeout 60 gdb -p " + std::to_string(pid) + " -batch -ex 'thread apply all bt' 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return;
  out += "\n== stacks of the child that timed out (" + cmd + ") ==\n";
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  ::pclose(f);
}

}  // namespace

child_result run_child(std::vector<std::string> args, std::vector<std::string> env, std::chrono::seconds limit,
                       std::string program) {
  if (program.empty()) program = self_path();
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
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      append_stacks(pid, result.output);
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
