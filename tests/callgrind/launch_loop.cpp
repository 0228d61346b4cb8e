// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Instructions per launch without a completion, for callgrind (tests/callgrind/check_instructions.cmake), on the
// simulated driver: what the calling thread spends on one launch of an empty kernel, in one of three ways:
//   cpp     cuasync::launch (tracing off): the reference, what the other two are read against;
//   c_abi   the C ABI's launch (libcuasync.so, dlopen'ed) without a completion: the handles' lookups, the arguments'
//           checks, the admission place and its batched return, then the same launch;
//   traced  cuasync::launch with tracing on (the recorder): the hook's GPU span and host span;
//   flight  cuasync::launch with the flight recorder on (trace/flight_recorder.hpp): a ring slot per launch;
//   cpp_placed  cuasync::launch with an admission place per launch (try_admit), given back per 16 after one event (as
//           bench/plugins/c_abi_bench.cpp's "with a place"): what the C ABI's credit replaced, in C++;
//   c_abi_args   the C ABI's launch of an extern "C" kernel of three parameters (float*, float, int): sizes checked
//           (its name as long as the C++ twin's mangled one, which the simulated driver copies on each launch);
//   c_abi_typed  the same of its C++ twin scale<float> with the three arguments' types (ABI 1.4): types compared too,
//           so that the two read together say what a typed launch costs.
//   cpp_completion  a launch with its completion through the C++ API as the C ABI's launch with a completion does it:
//           a place (try_admit), cuasync::launch, the record that takes the place over and the engine's callback
//           wait (completion_callbacks::wait); the calling thread's part only (the poller thread delivers);
//   c_abi_completion  the C ABI's launch with a completion into a queue: the calling thread's part (the records are
//           drained between batches, uncounted), read against cpp_completion (issue 26: launch + completion <= 1.05x).
// Launches go in batches of 32 with the stream drained between batches (outside what is counted), so that admission
// never refuses one (its bound is 64 per stream) and the count does not depend on how fast the simulated device runs.
// Only the batches are counted (CALLGRIND_TOGGLE_COLLECT); instrumentation starts after the setup (the C ABI's kernel
// is compiled by NVRTC, slow under callgrind). The count of thread 1 (the main thread, --separate-threads=yes) in the
// dump named "launches" is the figure.
//
// Usage: launch_loop cpp|cpp_placed|cpp_completion|c_abi|c_abi_args|c_abi_typed|c_abi_completion|traced|flight
//        [launches] [libcuasync.so]
//        (CUASYNC_LIBCUDA names the simulated driver)
#include <cuasync/cuasync.h>
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/recorder.hpp>

#include <valgrind/callgrind.h>

#include "c_abi_loader.hpp"
#include "placed_launch.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

using namespace cuasync;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry empty_kernel() { ret; }
)";
constexpr int batch = 32;
constexpr int warm_up_batches = 16;

using cuasync::bench::must;

// `launches` in batches; only the batches counted. `one` launches once, `drain` waits for the stream's work.
template <class One, class Drain>
void measure(int launches, One&& one, Drain&& drain) {
  for (int b = 0; b < warm_up_batches; ++b) {
    for (int i = 0; i < batch; ++i) one();
    drain();
  }
  for (int done = 0; done < launches;) {
    const int n = launches - done < batch ? launches - done : batch;
    CALLGRIND_TOGGLE_COLLECT;
    for (int i = 0; i < n; ++i) one();
    CALLGRIND_TOGGLE_COLLECT;
    drain();
    done += n;
  }
  CALLGRIND_DUMP_STATS_AT("launches");
}

void run_cpp(int launches, const std::string& mode) {
  primary_context primary = primary_context::retain(0);
  context_ref ctx = primary;
  // The flight recorder on before the kernel is described, as CUASYNC_FLIGHT=1 has it: its name is interned then.
  const bool flown = mode == "flight";
  if (flown) {
    trace::flight::options fo;
    fo.stall = std::chrono::milliseconds(0);  // no watch over stalls: its thread would count elsewhere anyway
    fo.signal = 0;
    fo.to_stderr = false;
    trace::flight::enable(fo);
  }
  module m = module::load(ctx, std::string_view(sim_ptx), "callgrind.ptx");
  const kernel_ref k = m.kernel("empty_kernel");
  stream s = stream::create(ctx, {.non_blocking = true});
  const bool traced = mode == "traced";
  if (traced) trace::enable({.output = {}, .max_records = 10'000'000});
  cuda_completion_source& source = cuda_completion_source::instance();
  const admission_site site = source.site_of(s);
  std::vector<admission_ticket> batch;
  batch.reserve(16);
  auto placed = [&] { bench::placed_launch(s, k, site, batch, {.grid = 1, .block = 1}); };
  // With a completion: the callbacks counted, so that the drain can wait for every one of a batch.
  struct counted final : completion_callback {
    std::atomic<int> done{0};
    void complete(std::error_code) noexcept override { done.fetch_add(1, std::memory_order_release); }
  } completions;
  int launched = 0;
  auto completed = [&] {
    admission_ticket ticket = source.try_admit(site);
    if (!ticket) throw std::runtime_error("launch_loop: no place (a batch is within the stream's bound)");
    launch(s, k, {.grid = 1, .block = 1});
    completion_callbacks::instance().wait(source.record_wait(s, std::move(ticket)), &completions);
    ++launched;
  };
  auto drain_completed = [&] {
    s.synchronize();
    while (completions.done.load(std::memory_order_acquire) < launched) completion_callbacks::instance().poll_once();
  };
  // Placed: the stream drained and the batches' places seen back (a pass on this thread) before the next batch.
  auto drain = [&] {
    s.synchronize();
    completion_callbacks::instance().poll_once();
  };
  CALLGRIND_START_INSTRUMENTATION;
  if (mode == "cpp_placed")
    measure(launches, placed, drain);
  else if (mode == "cpp_completion")
    measure(launches, completed, drain_completed);
  else
    measure(
        launches, [&] { launch(s, k, {.grid = 1, .block = 1}); }, [&] { s.synchronize(); });
  if (traced) trace::disable();
  if (flown) trace::flight::disable();
}

// What the C ABI modes launch: `name` from this source, with `args` and `types` (NULL: untyped).
constexpr char scale_source[] = R"(template <class T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
// As long a name as scale<float>'s mangled one (_Z5scaleIfEvPT_S0_i): the simulated driver copies it per launch.
extern "C" __global__ void scale_f32_as_extern(float* x, float a, int n) { scale<float>(x, a, n); }
extern "C" __global__ void empty_kernel() {}
)";

void run_c_abi(int launches, const char* library, const std::string& mode) {
  if (!bench::load_c_abi(library, library)) throw std::runtime_error(std::string("cannot load ") + library);
  const cuasync_api* api = bench::c_abi();
  cuasync_runtime_create_args rc{CUASYNC_RUNTIME_CREATE_ARGS_SIZE, 0, nullptr, nullptr};
  must(api->runtime_create(&rc), "runtime_create");
  cuasync_stream_create_args sc{CUASYNC_STREAM_CREATE_ARGS_SIZE, rc.runtime, nullptr, 0, nullptr};
  must(api->stream_create(&sc), "stream_create");
  cuasync_compile_args cc{};
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = rc.runtime;
  cc.name = "callgrind.cu";
  const char* expressions[] = {"scale<float>"};
  cc.source = scale_source;
  cc.name_expressions = expressions;
  cc.num_name_expressions = 1;
  must(api->compile(&cc), "compile");
  const char* name = mode == "c_abi" || mode == "c_abi_completion" ? "empty_kernel"
                     : mode == "c_abi_args" ? "scale_f32_as_extern"
                                            : "scale<float>";
  cuasync_kernel_get_args kg{};
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.module = cc.module;
  kg.name = name;
  must(api->kernel_get(&kg), "kernel_get");
  if ((mode == "c_abi_typed") != (kg.typed == 1)) throw std::runtime_error(std::string(name) + ": typed is wrong");
  cuasync_queue_create_args qc{CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, nullptr};
  must(api->queue_create(&qc), "queue_create");
  cuasync_launch_args la{};
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  la.stream = sc.stream;
  la.kernel = kg.kernel;
  la.grid[0] = la.block[0] = 1;
  const std::uint64_t x = 0;  // n = 0: nothing is read
  const float a = 2.0f;
  const std::int32_t n = 0;
  const cuasync_kernel_arg args[3] = {{&x, sizeof x}, {&a, sizeof a}, {&n, sizeof n}};
  const std::uint32_t types[3] = {CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F32), CUASYNC_ARG_F32, CUASYNC_ARG_I32};
  if (mode != "c_abi" && mode != "c_abi_completion") {
    la.args = args;
    la.num_args = 3;
  }
  if (mode == "c_abi_typed") la.arg_types = types;
  std::uint64_t token = 0;
  // The stream's work done, seen through the queue: the batches' places come back with it.
  auto drain = [&] {
    cuasync_stream_wait_args w{CUASYNC_STREAM_WAIT_ARGS_SIZE, sc.stream, {qc.queue, ++token, nullptr, nullptr}};
    must(api->stream_wait(&w), "stream_wait");
    cuasync_completion_record r;
    for (;;) {
      cuasync_queue_drain_args d{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, qc.queue, &r, 1, 0};
      must(api->queue_drain(&d), "queue_drain");
      if (d.count == 1) break;
    }
  };
  // With a completion into a second queue: its records drained after each batch (the stream's work seen done).
  must(api->queue_create(&qc), "queue_create");
  const cuasync_queue records = qc.queue;
  std::uint64_t awaited = 0, seen = 0;
  auto launch_completed = [&] {
    la.completion = {records, ++awaited, nullptr, nullptr};
    must(api->launch(&la), "launch");
  };
  auto drain_completed = [&] {
    cuasync_completion_record r[batch];
    while (seen < awaited) {
      cuasync_queue_drain_args d{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, records, r, batch, 0};
      must(api->queue_drain(&d), "queue_drain");
      for (std::size_t i = 0; i < d.count; ++i)
        if (r[i].code != CUASYNC_OK) throw std::runtime_error("launch_loop: a launch's completion failed");
      seen += d.count;
    }
  };
  CALLGRIND_START_INSTRUMENTATION;
  if (mode == "c_abi_completion")
    measure(launches, launch_completed, drain_completed);
  else
    measure(
        launches, [&] { must(api->launch(&la), "launch"); }, drain);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int launches = argc > 2 ? std::atoi(argv[2]) : 3000;
  const bool c_abi = mode == "c_abi" || mode == "c_abi_args" || mode == "c_abi_typed" || mode == "c_abi_completion";
  if ((mode != "cpp" && mode != "cpp_placed" && mode != "cpp_completion" && mode != "traced" && mode != "flight" &&
       !c_abi) ||
      launches <= 0 || (c_abi && argc < 4)) {
    std::fprintf(stderr, "usage: launch_loop cpp|cpp_placed|cpp_completion|c_abi|c_abi_args|c_abi_typed|"
                         "c_abi_completion|traced|flight [launches > 0] [libcuasync.so, for c_abi*]\n");
    return 2;
  }
  try {
    if (c_abi)
      run_c_abi(launches, argv[3], mode);
    else
      run_cpp(launches, mode);
    std::printf("launch_loop: %d launches (%s) measured after %d\n", launches, mode.c_str(), warm_up_batches * batch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_loop: %s\n", e.what());
    return 1;
  }
  return 0;
}
