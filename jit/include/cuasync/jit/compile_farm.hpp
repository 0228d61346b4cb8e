// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The compile farm: NVRTC compiles run in a bounded pool of worker processes (`cuasync-jit-worker`), so that
//! throughput scales past one process (NVRTC serializes inside a process: threads of one process stop at ~2.6x one
//! thread). `submit` is an uncached compile, like `jit::compile`; a `compiler` given a farm (`compiler::use_farm`)
//! keeps its memory cache, its one-compile-per-key and its disk cache, and sends only its misses here.
//!
//! Workers are started with `posix_spawn` (never `fork`: the parent has threads, CUDA and Asio state), lazily, one per
//! queued compile up to `farm_options::workers`; each loads NVRTC as this process would (the same environment) and
//! nothing of libcuda. One compile per worker at a time; the parent keeps a FIFO of compiles, and one I/O thread
//! talks to every worker over its own socket. A worker that crashes, exits or hangs past the timeout fails only the
//! compile it held (`farm_worker_error`) and is replaced. When no worker can be started (the executable is missing,
//! `posix_spawn` fails, the worker's NVRTC is not this process's), the farm compiles in this process instead and says
//! so once in the log (`CUASYNC_LOG=info`). docs/jit-farm.md has the design and the measurements.

#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/error.hpp>
#include <cuasync/jit/options.hpp>
#include <cuasync/jit/program.hpp>
#include <cuasync/jit/target.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::jit {

//! How a farm runs. Plain data.
struct farm_options {
  //! Worker processes at most. 0: the hardware threads, at most 16.
  unsigned workers = 0;
  //! Address-space cap of each worker (`RLIMIT_AS`), so a runaway compile fails alone. 0: none. Not applied in a
  //! sanitizer build (the sanitizers reserve terabytes of address space).
  std::uint64_t memory_cap_bytes = std::uint64_t{2} << 30;
  //! A compile running longer is killed with its worker (SIGKILL) and fails with `farm_worker_error`.
  std::chrono::milliseconds compile_timeout = std::chrono::seconds(120);
  //! A worker is replaced after this many compiles (NVRTC keeps caches that grow). 0: never.
  unsigned max_compiles_per_worker = 500;
  //! The worker executable. Empty: `$CUASYNC_JIT_WORKER` when set, else `cuasync-jit-worker` beside the binary that
  //! holds this code (libcuasync.so, or an executable linking cuasync statically), else in `../lib` from there.
  std::string worker_path;
  //! `NAME=value` entries put in the workers' environment over this process's (which they inherit), e.g. to give
  //! them another `CUASYNC_LIBNVRTC` or `CUASYNC_LOG`.
  std::vector<std::string> environment;

  //! The farm `jit::default_compiler()` uses (and with it the C ABI and Python): `CUASYNC_JIT_FARM=N` (N workers) or
  //! `=auto` (the hardware threads, at most 16); nothing when it is unset, empty, `0` or `off`.
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) naming any other value.
  static std::optional<farm_options> from_environment(std::source_location where = std::source_location::current());
};

//! Counters and state of a farm, each read on its own (not one snapshot).
struct farm_stats {
  unsigned workers = 0;                   //!< the pool's bound (`farm_options::workers` resolved)
  unsigned workers_alive = 0;             //!< worker processes running now (started and ready)
  std::uint64_t workers_started = 0;      //!< workers that said they were ready, ever
  std::uint64_t workers_lost = 0;         //!< workers that crashed, exited or were killed for a timeout
  std::uint64_t workers_recycled = 0;     //!< workers replaced after `max_compiles_per_worker`
  std::uint64_t start_failures = 0;       //!< workers that could not be started
  std::uint64_t compiles = 0;             //!< compiles that succeeded (in workers, or in this process as fallback)
  std::uint64_t failures = 0;             //!< compiles that failed (compile errors and lost workers alike)
  std::uint64_t timeouts = 0;             //!< compiles killed for `compile_timeout`
  std::uint64_t queued = 0;               //!< compiles waiting for a worker now
  bool in_process = false;                //!< true once the farm fell back to compiling in this process
  std::uint64_t peak_worker_rss_bytes = 0;  //!< the largest peak resident set a worker reported
};

//! A worker process crashed, exited or hung while it compiled `program_name()`. The compile is not retried (a kernel
//! that crashes NVRTC would crash every worker in turn). The code is `std::errc::timed_out` for a compile killed at
//! `farm_options::compile_timeout`, else `std::errc::owner_dead`; `what()` names the program, the signal or exit
//! status, and ends with the worker's last lines of stderr.
class farm_worker_error : public cuda_error {
 public:
  farm_worker_error(std::error_code code, std::string program_name, int signal, int exit_status,
                    std::string worker_stderr, std::string detail,
                    std::source_location where = std::source_location::current());
  const std::string& program_name() const noexcept { return program_name_; }
  //! The signal that ended the worker (SIGKILL for a timeout), or 0.
  int signal() const noexcept { return signal_; }
  //! The worker's exit status when it exited by itself, else -1.
  int exit_status() const noexcept { return exit_status_; }
  //! Its last lines of stderr (at most ~4 KiB), possibly empty.
  const std::string& worker_stderr() const noexcept { return stderr_; }
  bool timed_out() const noexcept { return code() == std::errc::timed_out; }

 private:
  std::string program_name_;
  int signal_;
  int exit_status_;
  std::string stderr_;
};

//! A bounded pool of compile worker processes. Thread-safe. The destructor fails the compiles still queued or
//! running (`farm_worker_error`, "the farm was destroyed"), ends the workers and waits for them; it must not run on
//! the farm's own threads (from a completion callback).
class compile_farm {
 public:
  //! A compile's completion: its result (`cache_outcome::miss`), or null and the exception it failed with.
  using callback = std::function<void(compile_result, std::exception_ptr)>;

  //! Starts the farm's threads; no worker yet (see `warm_up`). @throws std::system_error when a thread or pipe
  //! cannot be created.
  explicit compile_farm(farm_options options = {});
  ~compile_farm();
  compile_farm(const compile_farm&) = delete;
  compile_farm& operator=(const compile_farm&) = delete;

  //! `p` compiled for `t` with `o` by a worker, uncached (as `jit::compile`). Returns at once. Loads NVRTC in this
  //! process (for the argument list and the key, which both sides then agree on; it compiles nothing here).
  //! The future throws what `jit::compile` would (`compile_error` with NVRTC's log, ...), or `farm_worker_error`.
  //! @throws nvrtc_not_found_error, cuda_error for bad options, before anything is queued.
  std::shared_future<compile_result> submit(const program& p, const target& t, const compile_options& o = {},
                                            std::source_location where = std::source_location::current());
  //! The same, completing with `done(result, nullptr)` or `done({}, error)` on the farm's delivery thread (one
  //! thread runs every completion, in the order they finished: keep it short, and never destroy the farm from it).
  //! A completion must not wait for another compile of this farm (it would wait for its own thread).
  //! @throws as above; `done` is then not called.
  void submit(const program& p, const target& t, const compile_options& o, callback done,
              std::source_location where = std::source_location::current());

  //! Starts every worker now, each compiling a tiny kernel first, so the first real compiles do not pay NVRTC's
  //! start-up (~90 ms a process). Returns at once.
  void warm_up();
  //! Blocks until every worker started by `warm_up` or by demand is ready or has failed (for tests and benches).
  void wait_until_ready();

  farm_stats stats() const noexcept;
  const farm_options& options() const noexcept;

  //! Where the worker executable was looked for, in order (the first that exists is run).
  static std::vector<std::string> worker_candidates(const farm_options& options);

  //! For `compiler`: `p` compiled for `t` with NVRTC arguments `arguments` (already computed, `compile_options::
  //! arguments`) under `key`; `done(program, nullptr)` or `done(nullptr, error)` on the delivery thread.
  void submit_prepared(const program& p, const target& t, std::vector<std::string> arguments, const cache_key& key,
                       std::function<void(std::shared_ptr<const compiled_program>, std::exception_ptr)> done,
                       std::source_location where);

  struct impl;  // compile_farm.cpp and farm_io.cpp

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace cuasync::jit
