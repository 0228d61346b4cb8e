// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// One compile farm worker process, the parent's side (farm_worker.hpp).
#include "farm_worker.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace cuasync::jit::detail::farm {
namespace {

constexpr int worker_fd = 3;                 // the socket's number in the worker (its argument --fd)
constexpr std::size_t max_stderr_bytes = 4096;

std::string env_name(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// This process's environment with `overrides` (NAME=value) replacing or adding entries.
std::vector<std::string> worker_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& o : overrides) replaced = replaced || env_name(o) == env_name(entry);
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A descriptor numbered above the ones the worker's file actions set (0-3), so that a dup2 onto 3 always copies.
int above_three(int fd) {
  if (fd > worker_fd) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, worker_fd + 1);
  ::close(fd);
  return moved;
}

}  // namespace

std::string worker_exit::describe() const {
  if (signal) {
    const char* name = ::sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "exited with status " + std::to_string(exit_status);
}

std::optional<worker_process> worker_process::spawn(const std::string& path, const farm_options& options, bool warm,
                                                    std::string& error) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    error = std::string("socketpair failed: ") + std::strerror(errno);
    return std::nullopt;
  }
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) {
    error = std::string("pipe failed: ") + std::strerror(errno);
    ::close(sv[0]);
    ::close(sv[1]);
    return std::nullopt;
  }
  const int child_socket = above_three(sv[1]);
  const int child_stderr = above_three(err[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, child_stderr, 2);
  posix_spawn_file_actions_adddup2(&actions, child_socket, worker_fd);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&actions, worker_fd + 1);  // the host's descriptors without CLOEXEC
#endif
  std::vector<std::string> args{path, "--fd=" + std::to_string(worker_fd), "--parent=" + std::to_string(::getpid()),
                                "--memory-cap=" + std::to_string(options.memory_cap_bytes)};
  if (warm) args.emplace_back("--warm");
  std::vector<std::string> env = worker_environment(options.environment);
  auto argv = pointers(args);
  auto envp = pointers(env);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(child_socket);
  ::close(child_stderr);
  if (rc != 0) {
    error = "posix_spawn of '" + path + "' failed: " + std::strerror(rc);
    ::close(sv[0]);
    ::close(err[0]);
    return std::nullopt;
  }
  ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);
  worker_process w;
  w.pid_ = pid;
  w.socket_ = sv[0];
  w.stderr_ = err[0];
  return w;
}

worker_process::worker_process(worker_process&& o) noexcept
    : pid_(o.pid_), socket_(o.socket_), stderr_(o.stderr_), lines_(std::move(o.lines_)),
      partial_(std::move(o.partial_)), ring_bytes_(o.ring_bytes_), ended_(std::move(o.ended_)) {
  o.pid_ = -1;
  o.socket_ = o.stderr_ = -1;
}

worker_process::~worker_process() {
  if (pid_ > 0 && !ended_) end(0);
  close_fds();
}

void worker_process::close_fds() noexcept {
  if (socket_ >= 0) ::close(socket_);
  if (stderr_ >= 0) ::close(stderr_);
  socket_ = stderr_ = -1;
}

void worker_process::drain_stderr() {
  if (stderr_ < 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(stderr_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0 || errno != EAGAIN) {  // the worker's end closed: keep what was left without a newline
        if (!partial_.empty()) lines_.push_back(std::move(partial_));
        partial_.clear();
        ::close(stderr_);
        stderr_ = -1;
      }
      break;
    }
    partial_.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = partial_.find('\n')) != std::string::npos;) {
      lines_.push_back(partial_.substr(0, nl));
      ring_bytes_ += nl;
      partial_.erase(0, nl + 1);
    }
    if (partial_.size() > max_stderr_bytes) partial_.erase(0, partial_.size() - max_stderr_bytes);
    while (ring_bytes_ > max_stderr_bytes && lines_.size() > 1) {
      ring_bytes_ -= lines_.front().size();
      lines_.pop_front();
    }
  }
}

std::string worker_process::stderr_tail() const {
  std::string out;
  for (const auto& l : lines_) out += l + "\n";
  out += partial_;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

worker_exit worker_process::end(int grace_ms) {
  if (ended_) return *ended_;
  int status = 0;
  rusage ru{};
  pid_t r = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while ((r = ::wait4(pid_, &status, WNOHANG, &ru)) == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (r == 0) {
    ::kill(pid_, SIGKILL);
    while ((r = ::wait4(pid_, &status, 0, &ru)) < 0 && errno == EINTR) {
    }
  }
  worker_exit e;
  if (r == pid_) {
    if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    if (WIFEXITED(status)) e.exit_status = WEXITSTATUS(status);
    e.peak_rss = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  }
  // The worker is gone: its stderr pipe holds its last words, then EOF. Non-blocking: a grandchild holding it
  // must not stall the farm.
  drain_stderr();
  if (stderr_ >= 0) {
    ::close(stderr_);
    stderr_ = -1;
  }
  ended_ = e;
  return e;
}

}  // namespace cuasync::jit::detail::farm
