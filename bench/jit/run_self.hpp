// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// bench/jit: measurements taken in a fresh process. The bench runs itself again with a child mode and reads the
// child's "key=value" output.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace cuasync::bench {

// Runs this program again with `args`; returns its stdout.
inline std::string run_self(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<std::string> all{"/proc/self/exe"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("child failed: " + out);
  return out;
}

// The value after "key=" in a child's output.
inline double field(const std::string& out, const std::string& key) {
  const auto pos = out.find(key + "=");
  if (pos == std::string::npos) throw std::runtime_error("child output lacks " + key + ": " + out);
  return std::stod(out.substr(pos + key.size() + 1));
}

}  // namespace cuasync::bench
