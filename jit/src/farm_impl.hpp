// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to jit/: the compile farm's state. compile_farm.cpp holds the callers' side (submit, the delivery thread,
// the in-process fallback); farm_io.cpp the I/O thread, the only one that touches the workers.
#include <cuasync/jit/compile_farm.hpp>

#include "farm_protocol.hpp"
#include "farm_worker.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::jit {

namespace detail::farm {

using done_fn = std::function<void(std::shared_ptr<const compiled_program>, std::exception_ptr)>;

// One compile, from submit to its completion.
struct job {
  std::uint64_t id = 0;
  program source{"", ""};  // kept for the in-process fallback and for messages
  target t;
  std::vector<std::string> arguments;
  cache_key key;
  std::source_location where;
  done_fn done;
};

// A worker and what it is doing (I/O thread only).
struct slot {
  worker_process process;
  bool ready = false;  // its hello came
  std::shared_ptr<job> current;
  std::chrono::steady_clock::time_point deadline;
  unsigned compiles = 0;
  frame_parser parser;
  std::string outbox;  // the request being written
  std::size_t sent = 0;
  explicit slot(worker_process p) : process(std::move(p)) {}
};

}  // namespace detail::farm

struct compile_farm::impl {
  using job = detail::farm::job;
  using slot = detail::farm::slot;
  using clock = std::chrono::steady_clock;

  farm_options options;
  unsigned workers = 1;

  // Shared by callers, the I/O thread and the fallback threads.
  mutable std::mutex mutex;
  std::condition_variable changed;  // queue, readiness or state changed
  std::deque<std::shared_ptr<job>> queue;
  std::uint64_t next_id = 1;
  bool stopping = false;
  bool in_process = false;
  unsigned wanted = 0;       // workers the pool keeps running (grows with demand and warm_up, up to `workers`)
  bool warm = false;         // start workers with a warm-up compile
  unsigned starting = 0;     // workers started that have not said hello yet
  unsigned alive = 0;        // workers that said hello and run

  struct counters {
    std::atomic<std::uint64_t> started{0}, lost{0}, recycled{0}, start_failures{0}, compiles{0}, failures{0},
        timeouts{0}, peak_rss{0};
  } count;

  int wake_pipe[2] = {-1, -1};
  std::thread io;
  std::vector<std::thread> fallback;

  // Completions run here, one at a time, in order.
  std::mutex delivery_mutex;
  std::condition_variable delivery_ready;
  std::deque<std::function<void()>> deliveries;
  bool delivery_stop = false;
  std::thread delivery;

  // I/O thread only.
  std::vector<std::unique_ptr<slot>> slots;
  std::optional<std::string> worker_path;  // resolved on the first start; empty when none was found
  std::string worker_path_error;           // then why
  bool told_shrink = false;

  explicit impl(farm_options o);
  void wake() noexcept;
  void deliver(std::function<void()> f);
  void complete(const std::shared_ptr<job>& j, std::shared_ptr<const compiled_program> p, std::exception_ptr e);
  void go_in_process(const std::string& why);  // I/O thread, mutex not held
  void run_fallback();                          // a fallback thread's body
  void run_delivery();
  void run_io();                                // farm_io.cpp
};

}  // namespace cuasync::jit
