// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/async_io: how late a host learns that a kernel of D µs finished, at every wait length, under the default
// poll policy, against a busy cuEventQuery loop measured in the same process. Per D (20 µs ... 20 ms), sample after
// sample in turn:
//   busy       launch, record, spin on cuEventQuery (the floor; 100% of a core);
//   repeated   co_await async_launch of the same kernel and shape every time (predicted after its first samples);
//   first-seen co_await async_launch of a shape never launched before (a new work key each sample: the backoff);
//   C ABI fd   the C ABI's launch with its completion to a queue whose fd the host sleeps on (poll(), then a drain),
//              the same kernel every time (predicted; the poller thread reads closely, then the eventfd wakes the host);
//   C ABI spin the same, the queue drained by a spinning consumer (the engine's side without the fd's wake-up);
//   raw fd     the fd path a framework would write by hand: a thread spinning cuEventQuery (a core) writes an eventfd
//              the host sleeps on in poll(): the floor of any fd completion, the host's wake-up from poll() included.
// Then the CPU of the process while a 1 s kernel is awaited (first seen, and repeated), and with nothing pending.
// Usage: cuasync_wait_accuracy_bench [output folder] [libcuasync.so]   (writes wait_accuracy.json and .md)
// CUASYNC_WAIT_SCALE=0.2 takes a fifth of the samples.
#include <cuasync/async_io.hpp>
#include <cuasync/cuasync.h>

#include "bench.hpp"
#include "c_abi_loader.hpp"
#include "gpu.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using bench_clock = cuasync::bench::clock;
using cuasync::bench::stats;
using cuasync::bench::summarize;
using cuasync::bench::us_since;

namespace {

const cuasync_api* api;
using cuasync::bench::must;

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

const char* c_source = R"(extern "C" __global__ void sleep_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
})";

struct c_side {
  cuasync_stream stream;
  cuasync_kernel sleep;
  cuasync_queue queue;
  int fd;
};

c_side setup_c(CUstream native) {
  c_side c{};
  cuasync_runtime_create_args rc{CUASYNC_RUNTIME_CREATE_ARGS_SIZE, 0, nullptr, nullptr};
  must(api->runtime_create(&rc), "runtime_create");
  cuasync_stream_create_args sc{CUASYNC_STREAM_CREATE_ARGS_SIZE, rc.runtime, native, 0, nullptr};
  must(api->stream_create(&sc), "stream_create");
  c.stream = sc.stream;
  cuasync_compile_args cc{};
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = rc.runtime;
  cc.name = "wait_accuracy.cu";
  cc.source = c_source;
  must(api->compile(&cc), "compile");
  cuasync_kernel_get_args kg{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "sleep_ns", nullptr, 0};
  must(api->kernel_get(&kg), "kernel_get");
  c.sleep = kg.kernel;
  cuasync_queue_create_args qc{CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, nullptr};
  must(api->queue_create(&qc), "queue_create");
  c.queue = qc.queue;
  cuasync_queue_fd_args qf{CUASYNC_QUEUE_FD_ARGS_SIZE, c.queue, -1};
  must(api->queue_fd(&qf), "queue_fd");
  c.fd = qf.fd;
  return c;
}

// CPU seconds and wall seconds spent in the samples of one variant: the cores it kept busy while waiting.
struct cpu_meter {
  double cpu = 0, wall = 0;
  // getrusage counts in scheduler ticks in this VM (ms): too coarse for one sample; the process clock is exact.
  static double process_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
  }
  template <class F>
  double sample(F&& f) {
    const double c0 = process_seconds();
    const auto t0 = bench_clock::now();
    const double us = f();
    wall += us_since(t0) * 1e-6;
    cpu += process_seconds() - c0;
    return us;
  }
  double percent() const { return wall > 0 ? 100 * cpu / wall : 0; }
};

struct variant {
  const char* name;
  std::vector<double> us;
  cpu_meter meter;
};

// The raw fd path: a thread woken before each sample spins cuEventQuery on the armed event, then writes the eventfd
// that the host sleeps on. The thread sleeps between samples (so it costs nothing to the other variants); it is woken
// before the launch, so its own wake-up hides behind the kernel.
class raw_fd_waker {
 public:
  raw_fd_waker() : fd_(::eventfd(0, EFD_CLOEXEC)), thread_([this] { run(); }) {}
  ~raw_fd_waker() {
    state_.store(stopping);
    state_.notify_one();
    thread_.join();
    ::close(fd_);
  }
  int fd() const { return fd_; }
  void wake() {
    state_.store(awake);
    state_.notify_one();
  }
  void arm(CUevent e) {
    event_.store(e, std::memory_order_release);
    state_.store(armed, std::memory_order_release);
  }

 private:
  enum : int { asleep, awake, armed, stopping };
  void run() {
    for (;;) {
      state_.wait(asleep);
      int st = state_.load(std::memory_order_acquire);
      while (st == awake) st = state_.load(std::memory_order_acquire);
      if (st == stopping) return;
      const CUevent e = event_.load(std::memory_order_acquire);
      while (detail::driver().cuEventQuery(e) == CUDA_ERROR_NOT_READY) {
      }
      state_.store(asleep);
      const std::uint64_t one = 1;
      (void)!::write(fd_, &one, sizeof one);
    }
  }
  int fd_;
  std::atomic<int> state_{asleep};
  std::atomic<CUevent> event_{nullptr};
  std::thread thread_;
};

std::string format(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_wait_accuracy_bench needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const std::string out = bench::output_dir(argc, argv);
  // The library: argv[2], else beside this build, else where it was built.
  if (!bench::load_c_abi(argc > 2 ? argv[2] : "", CUASYNC_C_ABI_LIBRARY)) return 2;
  api = bench::c_abi();
  const char* scale_env = std::getenv("CUASYNC_WAIT_SCALE");
  const double scale = scale_env ? std::max(0.01, std::atof(scale_env)) : 1.0;

  stream s = stream::create(test::ctx());
  stream s_c = stream::create(test::ctx());  // the C ABI's (adopted)
  const c_side c = setup_c(s_c.get());
  kernel_ref sleep_k = test::kernels().kernel("sleep_ns");
  poll_policy policy = poll_policy::from_environment();
  // CUASYNC_WAIT_WINDOW_US: the executor window to measure with (the C++ side only), for choosing the default.
  if (const char* w = std::getenv("CUASYNC_WAIT_WINDOW_US"))
    policy.executor_window = std::chrono::microseconds(std::atoi(w));
  asio::io_context io;  // one service for every sample: its predictions persist
  asio::use_service<completion_service>(io).set_policy(policy);
  event busy_ev = event::create(test::ctx());
  event raw_fd_ev = event::create(test::ctx());
  raw_fd_waker waker;

  bench::report rep("wait_accuracy");
  rep.note("device", test::ctx().device().name());
  const char* policy_name = std::getenv("CUASYNC_POLL_POLICY");
  rep.note("policy", policy_name ? policy_name : "balanced (the default)");
  rep.note("prediction", policy.predict ? "on" : "off");
  rep.note("executor window", std::to_string(policy.executor_window.count() / 1000) + " us");
  rep.note("kernel", "sleep_ns(D): one block of one thread spinning on %globaltimer");
  rep.note("method", "per D the six variants in turn, sample after sample; the first 5 rounds of each D are warm-up "
                     "(the repeated kernel's earlier samples); cpu = process CPU over the variant's samples");

  const unsigned long long durations_us[] = {20, 100, 300, 1000, 3000, 20000};
  std::string table = "| D | variant | p50 us | p99 us | over busy p50 | over busy p99 | p50 target | p99 target | "
                      "cpu % | met |\n|---|---|---|---|---|---|---|---|---|---|\n";
  bool all_met = true;
  for (std::size_t di = 0; di < std::size(durations_us); ++di) {
    const unsigned long long d_ns = durations_us[di] * 1000;
    const int n = static_cast<int>(std::clamp(scale * 10.0e6 / (5.0 * durations_us[di] + 50), 200.0 * scale, 10000.0));
    constexpr int warm = 5;
    variant busy{"busy cuEventQuery"}, repeated{"repeated"}, first{"first-seen"}, c_abi{"C ABI fd, repeated"},
        c_spin{"C ABI queue drained spinning, repeated"}, raw_fd{"raw fd (cuEventQuery thread, eventfd, poll)"};
    const cuasync_kernel_arg c_arg{&d_ns, sizeof d_ns};
    for (int i = 0; i < n + warm; ++i) {
      const bool keep = i >= warm;
      double v = busy.meter.sample([&] {
        const auto t0 = bench_clock::now();
        launch(s, sleep_k, launch_config{.grid = 1, .block = 1}, d_ns);
        busy_ev.record(s);
        while (busy_ev.query_result() == CUDA_ERROR_NOT_READY) {
        }
        return us_since(t0);
      });
      if (keep) busy.us.push_back(v);
      auto awaited = [&](launch_config cfg) {
        double r = 0;
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
              const auto t0 = bench_clock::now();
              co_await async_launch(s, sleep_k, cfg, d_ns);
              r = us_since(t0);
            },
            rethrow);
        io.run();
        io.restart();
        return r;
      };
      v = repeated.meter.sample([&] { return awaited(launch_config{.grid = 1, .block = 1}); });
      if (keep) repeated.us.push_back(v);
      // A shape never launched before: grid.y and the dynamic shared memory change per sample (unique in the run).
      launch_config fresh{.grid = dims(1, static_cast<unsigned>(2 + di + 6 * (i / 3000))), .block = 1};
      fresh.shared_memory_bytes = 16u * static_cast<unsigned>(i % 3000 + 1);
      v = first.meter.sample([&] { return awaited(fresh); });
      if (keep) first.us.push_back(v);
      auto c_sample = [&](bool sleep_on_fd) {
        const auto t0 = bench_clock::now();
        cuasync_launch_args la{};
        la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
        la.stream = c.stream;
        la.kernel = c.sleep;
        la.grid[0] = la.block[0] = 1;
        la.args = &c_arg;
        la.num_args = 1;
        la.completion.queue = c.queue;
        la.completion.token = 1;
        must(api->launch(&la), "launch");
        cuasync_completion_record r;
        for (;;) {
          if (sleep_on_fd) {
            pollfd p{c.fd, POLLIN, 0};
            ::poll(&p, 1, -1);
          }
          cuasync_queue_drain_args dr{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, c.queue, &r, 1, 0};
          must(api->queue_drain(&dr), "queue_drain");
          if (dr.count == 1) break;
        }
        return us_since(t0);
      };
      v = c_abi.meter.sample([&] { return c_sample(true); });
      if (keep) c_abi.us.push_back(v);
      // The same queue drained by a spinning consumer: the engine's side alone (the poller thread's close read),
      // without the consumer's wake-up on the fd.
      v = c_spin.meter.sample([&] { return c_sample(false); });
      if (keep) c_spin.us.push_back(v);
      v = raw_fd.meter.sample([&] {
        waker.wake();
        const auto t0 = bench_clock::now();
        launch(s, sleep_k, launch_config{.grid = 1, .block = 1}, d_ns);
        raw_fd_ev.record(s);
        waker.arm(raw_fd_ev.get());
        pollfd p{waker.fd(), POLLIN, 0};
        ::poll(&p, 1, -1);
        std::uint64_t count = 0;
        (void)!::read(waker.fd(), &count, sizeof count);
        return us_since(t0);
      });
      if (keep) raw_fd.us.push_back(v);
    }
    const stats b = summarize(busy.us);
    const std::string dname = durations_us[di] >= 1000 ? std::to_string(durations_us[di] / 1000) + " ms"
                                                        : std::to_string(durations_us[di]) + " us";
    for (variant* v : {&busy, &repeated, &first, &c_abi, &c_spin, &raw_fd}) {
      const stats st = summarize(v->us);
      const bool is_busy = v == &busy, is_first = v == &first;
      // Targets: repeated p50 <= busy + max(3 us, 1%), p99 <= busy p99 + max(10 us, 3%); first-seen p50 <= busy + 3%.
      const double p50_target = is_first ? b.median * 1.03 : b.median + std::max(3.0, 0.01 * b.median);
      const double p99_target = b.p99 + std::max(10.0, 0.03 * b.p99);
      const bool met = is_busy || (st.median <= p50_target && (is_first || st.p99 <= p99_target));
      // The spinning consumer and the raw fd path only tell apart where the fd's time goes.
      if (!is_busy && v != &c_spin && v != &raw_fd) all_met = all_met && met;
      table += "| " + dname + " | " + v->name + format(" | %.1f | %.1f | %+.1f | %+.1f", st.median, st.p99,
                                                         st.median - b.median, st.p99 - b.p99);
      const std::string p50_t = is_busy ? "" : format("%.1f", p50_target);
      const std::string p99_t = is_busy || is_first ? "" : format("%.1f", p99_target);
      table += " | " + p50_t + " | " + p99_t + format(" | %.1f | ", v->meter.percent()) +
               (is_busy ? "" : met ? "yes" : "**no**") + " |\n";
      if (!is_busy)
        rep.add({"wait " + dname + ", " + v->name, "us", st, b, "busy cuEventQuery", true,
                 is_first ? "p50 <= busy + 3%" : "p50 <= busy + max(3 us, 1%), p99 <= busy p99 + max(10 us, 3%)"});
    }
    // The C ABI's fd against the raw fd path: both pay the host's wake-up from poll(), which grows with the sleep
    // (the CPU's idle states), so this is the like-for-like figure of what cuasync adds to an fd completion.
    rep.add({"wait " + dname + ", C ABI fd vs the raw fd path", "us", summarize(c_abi.us), summarize(raw_fd.us),
             raw_fd.name, true, "p50 <= raw fd + max(3 us, 1%), p99 <= raw fd p99 + max(10 us, 3%)"});
    std::printf("D = %s done (%d samples each)\n", dname.c_str(), n);
  }

  // CPU on a 1 s kernel, first seen (a shape of its own) and repeated (after 3 earlier ones), and idle.
  constexpr unsigned long long second_ns = 1'000'000'000ULL;
  auto cores_awaiting = [&](launch_config cfg) {
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { co_await async_launch(s, sleep_k, cfg, second_ns); }, rethrow);
    const double c0 = cuasync::bench::cpu_seconds();
    const auto t0 = bench_clock::now();
    io.run();
    io.restart();
    return 100 * (cuasync::bench::cpu_seconds() - c0) / (us_since(t0) * 1e-6);
  };
  launch_config long_shape{.grid = dims(1, 40), .block = 1};
  const double first_cpu = cores_awaiting(long_shape);
  for (int i = 0; i < 3; ++i) (void)cores_awaiting(long_shape);
  const double repeated_cpu = cores_awaiting(long_shape);
  const double idle_cpu = [&] {
    auto guard = asio::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double c0 = cuasync::bench::cpu_seconds();
    const auto t0 = bench_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double pct = 100 * (cuasync::bench::cpu_seconds() - c0) / (us_since(t0) * 1e-6);
    guard.reset();
    runner.join();
    io.restart();
    return pct;
  }();
  auto single = [](double v) {
    stats st;
    st.median = st.p99 = st.min = st.mean = v;
    st.n = 1;
    return st;
  };
  const stats none = single(1);
  rep.add({"CPU while a 1 s kernel is awaited, first seen", "% of a core", single(first_cpu), none, "(absolute)", true,
           "<= 2"});
  rep.add({"CPU while a 1 s kernel is awaited, repeated", "% of a core", single(repeated_cpu), none, "(absolute)",
           true, "<= 2"});
  rep.add({"CPU with nothing pending (io thread in run())", "% of a core", single(idle_cpu), none, "(absolute)", true,
           "<= 0.1"});
  all_met = all_met && first_cpu <= 2 && repeated_cpu <= 2 && idle_cpu <= 0.1;
  table += format("\nCPU while a 1 s kernel is awaited: first seen %.2f%%, repeated %.2f%% of a core; nothing pending "
                  "%.3f%%.\n",
                  first_cpu, repeated_cpu, idle_cpu);
  table += std::string("All targets met: ") + (all_met ? "yes" : "no") + "\n";
  rep.note("summary", all_met ? "all targets met" : "some targets missed (see the table)");
  rep.write(out);
  std::fputs(("\n" + table).c_str(), stdout);
  if (FILE* f = std::fopen((out + "/wait_accuracy_table.md").c_str(), "w")) {
    std::fputs(table.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
