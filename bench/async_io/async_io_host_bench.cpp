// bench/async_io host side: the completion service's CPU cost per awaited operation, without a GPU. A source whose
// tokens are always done stands in for finished GPU work, so what is measured is the service: start_wait, the pass,
// the hand-over to the executor and the coroutine's resumption.
// Usage: cuasync_async_io_host_bench [ops] [mode]   mode: all (default), or one of the scenario names below.
// Per-op instructions: run under `valgrind --tool=callgrind` with two op counts and divide the difference.
#include <cuasync/async_io/async_wait.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

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

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

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
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  io.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
  const double n = double(per) * chains;
  const auto st = asio::use_service<completion_service>(io).stats();
  std::printf("%-34s %9.0f ns/op wall  %9.0f ns/op cpu  %6.3f queries/op  %6.3f passes/op\n", s.name, 1e9 * wall / n,
              1e9 * cpu / n, src.queries.load() / n, st.passes / n);
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
  return 0;
}
