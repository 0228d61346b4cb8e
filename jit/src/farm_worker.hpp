// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to jit/: one compile farm worker process as its parent sees it. Started with posix_spawn (the socket's
// other end as its fd 3, its stderr into a pipe, stdout to /dev/null, every other descriptor closed), ended with
// SIGKILL, reaped with wait4 (which also gives its peak memory). Used only by the farm's I/O thread.
#include <cuasync/jit/compile_farm.hpp>

#include <sys/types.h>

#include <cstdint>

#include <deque>
#include <optional>
#include <string>

namespace cuasync::jit::detail::farm {

//! How a worker ended.
struct worker_exit {
  int signal = 0;        // the signal that ended it, or 0
  int exit_status = -1;  // its exit status when it exited, else -1
  std::uint64_t peak_rss = 0;  // bytes (wait4's ru_maxrss)
  //! "killed by signal 6 (SIGABRT)", "exited with status 3"
  std::string describe() const;
};

class worker_process {
 public:
  //! Starts `path` for `options`; `warm`: it compiles a tiny kernel before saying hello. Nothing (and `error` set)
  //! when it cannot be started.
  static std::optional<worker_process> spawn(const std::string& path, const farm_options& options, bool warm,
                                             std::string& error);
  worker_process(worker_process&& other) noexcept;
  worker_process& operator=(worker_process&&) = delete;
  ~worker_process();  // kills and reaps a worker not reaped yet

  pid_t pid() const noexcept { return pid_; }
  int socket() const noexcept { return socket_; }       // non-blocking
  int stderr_fd() const noexcept { return stderr_; }    // non-blocking; -1 once it ended

  //! Reads what its stderr pipe holds now into the ring of last lines.
  void drain_stderr();
  //! Its last lines of stderr (at most ~4 KiB).
  std::string stderr_tail() const;
  //! Ends it: waits up to `grace_ms` for it to exit by itself (its socket said EOF), then kills it (SIGKILL), reaps
  //! it, and reads the rest of its stderr. Idempotent: later calls return the first outcome.
  worker_exit end(int grace_ms = 0);

 private:
  worker_process() = default;
  void close_fds() noexcept;

  pid_t pid_ = -1;
  int socket_ = -1;
  int stderr_ = -1;
  std::deque<std::string> lines_;
  std::string partial_;
  std::size_t ring_bytes_ = 0;
  std::optional<worker_exit> ended_;
};

}  // namespace cuasync::jit::detail::farm
