// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/plugins: what the C ABI costs over the C++ API, and how fast its fd wakes a host up.
//   1. a launch and its completion, closed loop (the next launch once the completion is seen): through the C ABI
//      (completion records drained by a polling consumer, from a queue whose fd it never asked for, and from one whose
//      fd was handed out, which costs an eventfd write and read a completion) against the C++ API (cuasync::launch and
//      the engine's callbacks, a polled flag), alternating; and both spinning on a look for completions made on the
//      spinning thread (queue_poll, completion_callbacks::try_poll_once);
//   2. the round trip of a 20 µs kernel seen through the fd (poll() sleeping on it, then a drain) against the raw
//      busy query (launch, record, spin on cuEventQuery);
//   3. the launch alone of a C++ kernel with its arguments' types (ABI 1.4) against its extern "C" twin by size only:
//      what the type check costs (target <= 1.02).
// Usage: cuasync_c_abi_bench [output folder] [libcuasync.so]   (writes c_abi.json and c_abi.md)
#include <cuasync/cuasync.h>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include "bench.hpp"
#include "cpu_sampler.hpp"
#include "c_abi_loader.hpp"
#include "gpu.hpp"
#include "placed_launch.hpp"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace cuasync;
using bench_clock = cuasync::bench::clock;
using cuasync::bench::summarize;
using cuasync::bench::us_since;

namespace {
const cuasync_api* api;
using cuasync::bench::must;
const launch_config one{.grid = 1, .block = 1};
constexpr unsigned long long kernel_ns = 20'000;

const char* source = R"(template <class T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" __global__ void scale_f32_as_extern(float* x, float a, int n) { scale<float>(x, a, n); }
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void sleep_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
})";

struct c_side {
  cuasync_runtime rt;
  cuasync_stream stream;
  cuasync_kernel empty, sleep;
  cuasync_kernel typed, untyped;  // scale<float> and its extern "C" twin
  cuasync_queue queue;   // its fd handed out
  cuasync_queue polled;  // drained by polling only: its fd never asked for
  int fd;
};

c_side setup_c(CUstream native) {
  c_side c{};
  cuasync_runtime_create_args rc{CUASYNC_RUNTIME_CREATE_ARGS_SIZE, 0, nullptr, nullptr};
  must(api->runtime_create(&rc), "runtime_create");
  c.rt = rc.runtime;
  cuasync_stream_create_args sc{CUASYNC_STREAM_CREATE_ARGS_SIZE, c.rt, native, 0, nullptr};
  must(api->stream_create(&sc), "stream_create");
  c.stream = sc.stream;
  cuasync_compile_args cc{};
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = c.rt;
  cc.name = "bench.cu";
  cc.source = source;
  const char* expressions[] = {"scale<float>"};
  cc.name_expressions = expressions;
  cc.num_name_expressions = 1;
  must(api->compile(&cc), "compile");
  cuasync_kernel_get_args k1{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "empty_kernel", nullptr, 0};
  cuasync_kernel_get_args k2{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "sleep_ns", nullptr, 0};
  cuasync_kernel_get_args k3{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "scale<float>", nullptr, 0};
  cuasync_kernel_get_args k4{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "scale_f32_as_extern", nullptr, 0};
  for (auto* k : {&k1, &k2, &k3, &k4}) must(api->kernel_get(k), "kernel_get");
  if (k3.typed != 1 || k4.typed != 0) throw std::runtime_error("c_abi_bench: scale<float> is not typed");
  c.empty = k1.kernel;
  c.sleep = k2.kernel;
  c.typed = k3.kernel;
  c.untyped = k4.kernel;
  cuasync_queue_create_args qc{CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, nullptr};
  must(api->queue_create(&qc), "queue_create");
  c.queue = qc.queue;
  must(api->queue_create(&qc), "queue_create");
  c.polled = qc.queue;
  cuasync_queue_fd_args qf{CUASYNC_QUEUE_FD_ARGS_SIZE, c.queue, -1};
  must(api->queue_fd(&qf), "queue_fd");
  c.fd = qf.fd;
  return c;
}

// One launch through the C ABI with its completion on the fd-queue; returns once the record is drained.
void c_launch_and_wait(const c_side& c, cuasync_queue q, cuasync_kernel k, const cuasync_kernel_arg* args,
                       std::size_t n, bool sleep, bool poll_here = false) {
  cuasync_launch_args la{};
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  la.stream = c.stream;
  la.kernel = k;
  la.grid[0] = la.block[0] = 1;
  la.args = args;
  la.num_args = n;
  la.completion.queue = q;
  la.completion.token = 1;
  must(api->launch(&la), "launch");
  cuasync_completion_record r;
  for (;;) {
    if (sleep) {
      pollfd p{c.fd, POLLIN, 0};
      ::poll(&p, 1, -1);
    }
    cuasync_queue_drain_args d{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, &r, 1, 0};
    if (poll_here)
      must(api->queue_poll(&d), "queue_poll");  // the look for finished work made on this thread (ABI 1.7)
    else
      must(api->queue_drain(&d), "queue_drain");
    if (d.count == 1) return;
  }
}

struct flag_callback final : completion_callback {
  std::atomic<bool> done{false};
  void complete(std::error_code) noexcept override { done.store(true, std::memory_order_release); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_c_abi_bench needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const std::string out = bench::output_dir(argc, argv);
  // The library: argv[2], else beside this build (bench/plugins/../../plugins), else where it was built.
  // The library: argv[2], else beside this build, else where it was built.
  if (!bench::load_c_abi(argc > 2 ? argv[2] : "", CUASYNC_C_ABI_LIBRARY)) return 2;
  api = bench::c_abi();

  stream s = stream::create(test::ctx());
  const c_side c = setup_c(s.get());
  kernel_ref empty = test::kernels().kernel("empty_kernel"), sleep = test::kernels().kernel("sleep_ns");
  const cuasync_kernel_arg sleep_arg{&kernel_ns, sizeof kernel_ns};

  bench::report rep("c_abi");
  rep.note("device", test::ctx().device().name());
  constexpr int reps = 7, per = 4000;
  std::vector<double> c_rates, fd_rates, cpp_rates, admitted_rates, c_poll_rates, cpp_poll_rates;
  for (int r = 0; r < reps + 1; ++r) {
    auto t0 = bench_clock::now();
    {
      bench::cpu_sampler::scope sampled(r ? "c-abi-drain" : "");
      for (int i = 0; i < per; ++i) c_launch_and_wait(c, c.polled, c.empty, nullptr, 0, false);
    }
    const double c_us = us_since(t0) / per;
    // A consumer that spins on its queue with queue_poll (ABI 1.7), against the C++ API spinning on the engine's
    // look made on its own thread (completion_callbacks::try_poll_once): both see completion without the poller
    // thread's hand-over.
    t0 = bench_clock::now();
    {
      bench::cpu_sampler::scope sampled(r ? "c-abi-poll" : "");
      for (int i = 0; i < per; ++i) c_launch_and_wait(c, c.polled, c.empty, nullptr, 0, false, true);
    }
    const double c_poll_us = us_since(t0) / per;
    t0 = bench_clock::now();
    for (int i = 0; i < per; ++i) {
      launch(s, empty, one);
      flag_callback cb;
      completion_callbacks::instance().wait(cuda_completion_source::instance().record_wait(s, {}), &cb);
      while (!cb.done.load(std::memory_order_acquire)) completion_callbacks::instance().try_poll_once();
    }
    const double cpp_poll_us = us_since(t0) / per;
    t0 = bench_clock::now();
    for (int i = 0; i < per; ++i) c_launch_and_wait(c, c.queue, c.empty, nullptr, 0, false);
    const double fd_us = us_since(t0) / per;
    t0 = bench_clock::now();
    {
      bench::cpu_sampler::scope sampled(r ? "cpp-callback" : "");
      for (int i = 0; i < per; ++i) {
        launch(s, empty, one);
        flag_callback cb;
        completion_callbacks::instance().wait(cuda_completion_source::instance().record_wait(s, {}), &cb);
        while (!cb.done.load(std::memory_order_acquire)) {
        }
      }
    }
    const double cpp_us = us_since(t0) / per;
    // The same with a place taken first, as every C ABI launch does (so that no call blocks on a full hardware
    // queue): what admission costs, apart from the ABI.
    const admission_site site = cuda_completion_source::instance().site_of(s);
    t0 = bench_clock::now();
    for (int i = 0; i < per; ++i) {
      admission_ticket ticket = cuda_completion_source::instance().try_admit(site);
      launch(s, empty, one);
      flag_callback cb;
      completion_callbacks::instance().wait(
          cuda_completion_source::instance().record_wait(s, std::move(ticket)), &cb);
      while (!cb.done.load(std::memory_order_acquire)) {
      }
    }
    const double admitted_us = us_since(t0) / per;
    if (r == 0) continue;  // warm-up
    c_rates.push_back(c_us);
    c_poll_rates.push_back(c_poll_us);
    cpp_poll_rates.push_back(cpp_poll_us);
    fd_rates.push_back(fd_us);
    cpp_rates.push_back(cpp_us);
    admitted_rates.push_back(admitted_us);
  }
  rep.add({"launch + completion, closed loop, C ABI (queue drained by polling)", "us", summarize(c_rates),
           summarize(cpp_rates), "C++ API (launch + engine callback)", true, "<= 1.10"});
  rep.add({"launch + completion, closed loop, C ABI (fd handed out, drained by polling)", "us", summarize(fd_rates),
           summarize(cpp_rates), "C++ API (launch + engine callback)", true, ""});
  rep.add({"launch + completion, closed loop, C ABI (queue drained by polling)", "us", summarize(c_rates),
           summarize(admitted_rates), "C++ API with admission (try_admit + launch + engine callback)", true, ""});
  rep.add({"launch + completion, closed loop, C ABI (spun on queue_poll)", "us", summarize(c_poll_rates),
           summarize(cpp_poll_rates), "C++ API (launch + engine callback, spun on try_poll_once)", true, "<= 1.05"});
  rep.add({"launch + completion, closed loop, C ABI (spun on queue_poll)", "us", summarize(c_poll_rates),
           summarize(cpp_rates), "C++ API (launch + engine callback)", true, ""});

  // Where the difference lies: the launch alone (32 at a time, then the stream drains) and the completion alone (a
  // wait on an idle stream, seen through the fd queue or the engine's callback), alternating.
  std::vector<double> c_launch, cpp_launch, admitted_launch_us, c_done, cpp_done, typed_us, untyped_us;
  const admission_site launch_site = cuda_completion_source::instance().site_of(s);
  std::vector<admission_ticket> places;
  places.reserve(16);
  cuasync_launch_args plain{};
  plain.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  plain.stream = c.stream;
  plain.kernel = c.empty;
  plain.grid[0] = plain.block[0] = 1;
  // scale<float>(x, a, n) with n = 0 (nothing is read): typed, and its extern "C" twin by size.
  const std::uint64_t x = 0;
  const float a = 2.0f;
  const std::int32_t n = 0;
  const cuasync_kernel_arg scale_args[3] = {{&x, sizeof x}, {&a, sizeof a}, {&n, sizeof n}};
  const std::uint32_t scale_types[3] = {CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F32), CUASYNC_ARG_F32, CUASYNC_ARG_I32};
  cuasync_launch_args typed = plain, untyped = plain;
  typed.kernel = c.typed;
  untyped.kernel = c.untyped;
  typed.args = untyped.args = scale_args;
  typed.num_args = untyped.num_args = 3;
  typed.arg_types = scale_types;
  for (int r = 0; r < reps + 1; ++r) {
    double c_us = 0, cpp_us = 0, admitted_us = 0, typed_batch_us = 0, untyped_batch_us = 0;
    for (int batch = 0; batch < per / 32; ++batch) {
      auto t0 = bench_clock::now();
      for (int i = 0; i < 32; ++i) must(api->launch(&typed), "launch");
      typed_batch_us += us_since(t0);
      s.synchronize();
      completion_callbacks::instance().poll_once();  // their places back, outside the timed batches
      t0 = bench_clock::now();
      for (int i = 0; i < 32; ++i) must(api->launch(&untyped), "launch");
      untyped_batch_us += us_since(t0);
      s.synchronize();
      completion_callbacks::instance().poll_once();
      t0 = bench_clock::now();
      for (int i = 0; i < 32; ++i) must(api->launch(&plain), "launch");
      c_us += us_since(t0);
      s.synchronize();
      t0 = bench_clock::now();
      for (int i = 0; i < 32; ++i) launch(s, empty, one);
      cpp_us += us_since(t0);
      s.synchronize();
      t0 = bench_clock::now();
      for (int i = 0; i < 32; ++i) bench::placed_launch(s, empty, launch_site, places, one);
      admitted_us += us_since(t0);
      s.synchronize();
      completion_callbacks::instance().poll_once();  // the places back before the next batch, as the C ABI's admit does
    }
    auto t0 = bench_clock::now();
    for (int i = 0; i < per / 4; ++i) {
      cuasync_stream_wait_args w{CUASYNC_STREAM_WAIT_ARGS_SIZE, c.stream, {c.polled, 1, nullptr, nullptr}};
      must(api->stream_wait(&w), "stream_wait");
      cuasync_completion_record rec;
      for (;;) {
        cuasync_queue_drain_args d{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, c.polled, &rec, 1, 0};
        must(api->queue_drain(&d), "queue_drain");
        if (d.count == 1) break;
      }
    }
    const double c_wait = us_since(t0) / (per / 4);
    t0 = bench_clock::now();
    for (int i = 0; i < per / 4; ++i) {
      flag_callback cb;
      completion_callbacks::instance().wait(cuda_completion_source::instance().record_wait(s, {}), &cb);
      while (!cb.done.load(std::memory_order_acquire)) {
      }
    }
    const double cpp_wait = us_since(t0) / (per / 4);
    if (r == 0) continue;
    c_launch.push_back(c_us / per);
    cpp_launch.push_back(cpp_us / per);
    admitted_launch_us.push_back(admitted_us / per);
    typed_us.push_back(typed_batch_us / per);
    untyped_us.push_back(untyped_batch_us / per);
    c_done.push_back(c_wait);
    cpp_done.push_back(cpp_wait);
  }
  rep.add({"launch alone, C ABI", "us", summarize(c_launch), summarize(cpp_launch), "cuasync::launch", true,
           "<= 1.10"});
  // Like for like: the C++ launch taking a place per launch and giving places back in batches of 16, as the C ABI's.
  rep.add({"launch alone, C ABI", "us", summarize(c_launch), summarize(admitted_launch_us),
           "cuasync::launch with a place (try_admit, given back per 16)", true, ""});
  rep.add({"launch alone, C++ with a place per launch", "us", summarize(admitted_launch_us), summarize(cpp_launch),
           "cuasync::launch", true, ""});
  rep.add({"launch alone, C ABI, scale<float> with its 3 arguments' types (ABI 1.4)", "us", summarize(typed_us),
           summarize(untyped_us), "its extern \"C\" twin, sizes only", true, "<= 1.02"});
  rep.add({"completion alone (idle stream), C ABI queue drained by polling", "us", summarize(c_done), summarize(cpp_done),
           "C++ record + engine callback", true, ""});

  std::vector<double> fd_rt, busy_rt;
  event ev = event::create(test::ctx());
  for (int i = 0; i < 2200; ++i) {
    auto t0 = bench_clock::now();
    c_launch_and_wait(c, c.queue, c.sleep, &sleep_arg, 1, true);
    const double f = us_since(t0);
    t0 = bench_clock::now();
    launch(s, sleep, one, kernel_ns);
    ev.record(s);
    while (ev.query_result() == CUDA_ERROR_NOT_READY) {
    }
    const double b = us_since(t0);
    if (i >= 200) {
      fd_rt.push_back(f);
      busy_rt.push_back(b);
    }
  }
  rep.add({"round trip 20 us kernel, C ABI fd (poll sleeping)", "us", summarize(fd_rt), summarize(busy_rt),
           "raw busy cuEventQuery", true, "<= 1.3"});
  rep.write(out);
  return 0;
}
