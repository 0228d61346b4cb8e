// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/async_io host side: the completion service's CPU cost per awaited operation, without a GPU. A source whose
// tokens are always done stands in for finished GPU work, so what is measured is the service: start_wait, the pass,
// the hand-over to the executor and the coroutine's resumption.
// The `model-*` scenarios model the GPU throughput bench (bench/async_io/async_io_bench.cpp, part 2) with the H200's
// measured host costs: a "launch" spins 3.5 µs and a "record" 0.2 µs on the io thread, the work is done 4 µs after
// its launch, and a query spins 0.2 µs on pending work and 1.4 µs on finished work (cuEventQuery). 64 coroutines
// over 1, 8 or 64 queues, each launching and awaiting in a loop, against the raw launch + record rate.
// Usage: cuasync_async_io_host_bench [ops] [mode]   mode: all (default), model (the model-* scenarios), or one of the
// scenario names below.
// Per-op instructions: run under `valgrind --tool=callgrind` with two op counts and divide the difference.
#include <cuasync/async_io/async_wait.hpp>

#include "bench.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace cuasync;

namespace {

// Every token is done at its first query, as a kernel that finished before it was polled.
class ready_source final : public completion_source {
 public:
  std::atomic<std::uint64_t> queries{0};
  poll_result query(std::uintptr_t) noexcept override {
    queries.fetch_add(1, std::memory_order_relaxed);
    return {poll_status::ready, {}, {}};
  }
  void release(std::uintptr_t) noexcept override {}
};

using model_clock = std::chrono::steady_clock;
constexpr std::chrono::nanoseconds model_launch{3500}, model_record{200}, model_gpu{4000}, model_query_pending{200},
    model_query_done{1400};

void spin_for(std::chrono::nanoseconds d) {
  const auto end = model_clock::now() + d;
  while (model_clock::now() < end) {
  }
}

thread_local bool on_io_thread = false;

// Tokens are the time (ns since the clock's epoch) at which the modelled GPU work is done; queries cost what
// cuEventQuery costs.
class modelled_gpu_source final : public completion_source {
 public:
  std::atomic<std::uint64_t> queries{0}, io_queries{0};
  static std::uintptr_t launch_and_record() {
    spin_for(model_launch);
    const auto done_at = model_clock::now() + model_gpu;
    spin_for(model_record);
    return static_cast<std::uintptr_t>(done_at.time_since_epoch().count());
  }
  poll_result query(std::uintptr_t token) noexcept override {
    queries.fetch_add(1, std::memory_order_relaxed);
    if (on_io_thread) io_queries.fetch_add(1, std::memory_order_relaxed);
    const bool done = model_clock::now().time_since_epoch().count() >= static_cast<long long>(token);
    spin_for(done ? model_query_done : model_query_pending);
    return {done ? poll_status::ready : poll_status::pending, {}, {}};
  }
  void release(std::uintptr_t) noexcept override {}
};

struct scenario {
  const char* name;
  poll_policy policy;
  int queues;
  bool coroutine;  // false: a plain callback that starts the next wait
  bool ordered;    // targets carry a recording order, as pooled CUDA events do
};

std::uint64_t next_order = 1;  // one counter for all queues: increasing within each

wait_target make_target(ready_source* src, std::uintptr_t queue, bool ordered) {
  return {src, queue, 1, 1, nullptr, ordered ? next_order++ : 0};
}

struct callback_chain {
  asio::io_context* io;
  ready_source* src;
  std::uintptr_t queue;
  bool ordered;
  int left;
  void start() {
    async_wait(io->get_executor(), make_target(src, queue, ordered), [this](std::error_code ec) {
      if (ec) std::abort();
      if (--left > 0) start();
    });
  }
};

void run(const scenario& s, int ops) {
  ready_source src;
  asio::io_context io(1);
  asio::use_service<completion_service>(io).set_policy(s.policy);
  constexpr int chains = 64;
  const int per = ops / chains;
  std::vector<callback_chain> cbs;
  cbs.reserve(chains);
  for (int c = 0; c < chains; ++c) {
    const std::uintptr_t queue = 1 + c % s.queues;
    if (s.coroutine) {
      asio::co_spawn(
          io,
          [&src, queue, per, ordered = s.ordered]() -> asio::awaitable<void> {
            for (int i = 0; i < per; ++i) co_await async_wait(make_target(&src, queue, ordered), asio::use_awaitable);
          },
          [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
          });
    } else {
      cbs.push_back({&io, &src, queue, s.ordered, per});
      asio::post(io, [cb = &cbs.back()] { cb->start(); });
    }
  }
  const double c0 = cuasync::bench::cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  io.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cuasync::bench::cpu_seconds() - c0;
  const double n = double(per) * chains;
  const auto st = asio::use_service<completion_service>(io).stats();
  std::printf("%-34s %9.0f ns/op wall  %9.0f ns/op cpu  %6.3f queries/op  %6.3f passes/op\n", s.name, 1e9 * wall / n,
              1e9 * cpu / n, src.queries.load() / n, st.passes / n);
}

// How many cores two spinning threads get here (the model's balanced runs need a second core for the poller).
double cores_for_two_threads() {
  const double c0 = cuasync::bench::cpu_seconds();
  const auto t0 = model_clock::now();
  std::thread other([] { spin_for(std::chrono::milliseconds(200)); });
  spin_for(std::chrono::milliseconds(200));
  other.join();
  return (cuasync::bench::cpu_seconds() - c0) / std::chrono::duration<double>(model_clock::now() - t0).count();
}

double raw_model_rate(int ops) {
  const auto t0 = model_clock::now();
  for (int i = 0; i < ops; ++i) (void)modelled_gpu_source::launch_and_record();
  return ops / std::chrono::duration<double>(model_clock::now() - t0).count();
}

void run_model(const char* name, const poll_policy& policy, int queues, int ops, double raw_rate) {
  modelled_gpu_source src;
  asio::io_context io(1);
  completion_service& svc = asio::use_service<completion_service>(io);
  svc.set_policy(policy);
  constexpr int coroutines = 64;
  const int per = ops / coroutines;
  std::atomic<std::uint64_t> order{1};
  for (int c = 0; c < coroutines; ++c) {
    const std::uintptr_t queue = 1 + c % queues;
    asio::co_spawn(
        io,
        [&src, &order, queue, per]() -> asio::awaitable<void> {
          for (int i = 0; i < per; ++i) {
            const std::uintptr_t token = modelled_gpu_source::launch_and_record();
            co_await async_wait(wait_target{&src, queue, 1, token, nullptr, order.fetch_add(1)}, asio::use_awaitable);
          }
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
  }
  on_io_thread = true;
  const double c0 = cuasync::bench::cpu_seconds();
  const auto t0 = model_clock::now();
  io.run();
  const double wall = std::chrono::duration<double>(model_clock::now() - t0).count();
  const double cpu = cuasync::bench::cpu_seconds() - c0;
  on_io_thread = false;
  const double n = double(per) * coroutines;
  const auto st = svc.stats();
  std::printf("%-26s %7.1fk/s  raw %7.1fk/s  ratio %.3f  io-thread queries/op %.3f  all queries/op %.3f  "
              "executor passes/op %.3f  batches/op %.3f  cpu %.2f cores\n",
              name, n / wall / 1e3, raw_rate / 1e3, n / wall / raw_rate, src.io_queries.load() / n,
              src.queries.load() / n, st.executor_passes / n, st.batches / n, cpu / wall);
}

}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 640'000;
  const std::string only = argc > 2 ? argv[2] : "all";
  poll_policy latency = poll_policy::latency();
  poll_policy thread = poll_policy::balanced();
  thread.executor_window = {};  // the poller thread hands every completion over (the cross-thread path)
  const scenario all[] = {
      {"latency-coro-1q", latency, 1, true, false},
      {"latency-coro-1q-ordered", latency, 1, true, true},
      {"latency-coro-64q", latency, 64, true, false},
      {"latency-callback-1q", latency, 1, false, false},
      {"balanced-coro-1q-ordered", poll_policy::balanced(), 1, true, true},
      {"balanced-coro-64q-ordered", poll_policy::balanced(), 64, true, true},
      {"thread-coro-1q", thread, 1, true, false},
      {"thread-coro-64q", thread, 64, true, false},
  };
  for (const scenario& s : all)
    if (only == "all" || only == s.name) run(s, ops);
  struct model {
    const char* name;
    poll_policy policy;
    int queues;
  };
  const model models[] = {
      {"model-balanced-1q", poll_policy::balanced(), 1},   {"model-balanced-8q", poll_policy::balanced(), 8},
      {"model-balanced-64q", poll_policy::balanced(), 64}, {"model-latency-1q", latency, 1},
      {"model-latency-8q", latency, 8},                    {"model-latency-64q", latency, 64},
  };
  const int model_ops = std::min(ops, 64'000);
  double raw = 0;
  for (const model& m : models)
    if (only == "all" || only == "model" || only == m.name) {
      if (raw == 0) {
        raw = raw_model_rate(model_ops);
        std::printf("two spinning threads get %.2f cores here\n", cores_for_two_threads());
      }
      run_model(m.name, m.policy, m.queues, model_ops, raw);
    }
  return 0;
}
