// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A probe, not a benchmark of cuasync: how much work the driver accepts on streams whose work cannot run (behind a
// gate kernel) before an enqueue call blocks the calling thread until the GPU drains. These figures set the default
// bounds of async_io's admission (docs/architecture.md, "Admission").
//   1. one stream, by kind of operation: launch alone; launch + event record; launch + record + stream write-value;
//      4 KiB pinned H2D copy + record;
//   2. launch + record round-robin over 2 … 128 gated streams: the total accepted, and per stream;
//   3. the same with only one of the streams gated: do the others' enqueues block too (a shared hardware queue)?
// An enqueue counts as blocked when it takes more than 20 ms; a watcher thread opens the gate as soon as one call has
// been inside the driver for 50 ms, so every case ends.
// Usage: cuasync_queue_depth_probe [parts, e.g. 12]
#include <cuasync/driver.hpp>

#include "gpu.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

using namespace cuasync;
using steady = std::chrono::steady_clock;

namespace {
const launch_config one{.grid = 1, .block = 1};

long long now_ns() { return steady::now().time_since_epoch().count(); }

struct outcome {
  long accepted = 0;       // enqueues that returned quickly before the first blocked one
  double blocked_ms = 0;   // how long the blocked call took (0: none blocked within the limit)
};

// Enqueues `op(i)` for i = 0.. until one call blocks (or `limit` calls), with `gated` streams held by one gate.
outcome fill(const std::vector<stream_ref>& gated, long limit, const std::function<void(long)>& op) {
  static pinned_buffer flag = pinned_buffer::allocate(test::ctx(), sizeof(int));
  volatile int* f = flag.data<volatile int>();
  *f = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (stream_ref s : gated) launch(s, test::kernels().kernel("spin_until_flag"), one, flag.data<int>());
  std::atomic<long long> call_start{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      const long long t = call_start.load();
      if (t != 0 && now_ns() - t > 50'000'000) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    *f = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  });
  outcome o;
  for (long i = 0; i < limit; ++i) {
    const long long t0 = now_ns();
    call_start.store(t0);
    op(i);
    call_start.store(0);
    const double ms = (now_ns() - t0) / 1e6;
    if (ms > 20) {
      o.blocked_ms = ms;
      break;
    }
    ++o.accepted;
  }
  done.store(true);
  watcher.join();
  return o;
}

void report(const char* what, const outcome& o, int streams) {
  if (o.blocked_ms > 0)
    std::printf("%-52s accepted %6ld (%6.0f per stream), then one call blocked %.0f ms\n", what, o.accepted,
                double(o.accepted) / streams, o.blocked_ms);
  else
    std::printf("%-52s accepted %6ld (%6.0f per stream) without blocking\n", what, o.accepted,
                double(o.accepted) / streams);
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto want = [&](int part) { return argc < 2 || std::strchr(argv[1], '0' + part) != nullptr; };
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_queue_depth_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  context_ref ctx = test::ctx();
  const char* conn = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("CUDA_DEVICE_MAX_CONNECTIONS=%s\n", conn ? conn : "(unset: 8)");
  kernel_ref empty = test::kernels().kernel("empty_kernel");
  std::vector<event> events;
  for (int i = 0; i < 256; ++i) events.push_back(event::create(ctx));
  pinned_buffer words = pinned_buffer::allocate(ctx, 4096);
  pinned_buffer src = pinned_buffer::allocate(ctx, 4096);
  device_buffer dst = device_buffer::allocate(ctx, 4096);
  constexpr long limit = 200'000;

  if (want(1)) {
    std::printf("== 1. one gated stream, by operation ==\n");
    stream s = stream::create(ctx);
    const std::vector<stream_ref> g{s};
    report("launch", fill(g, limit, [&](long) { launch(s, empty, one); }), 1);
    s.synchronize();
    report("launch + record", fill(g, limit, [&](long i) {
             launch(s, empty, one);
             events[i % events.size()].record(s);
           }), 1);
    s.synchronize();
    report("launch + write-value + record", fill(g, limit, [&](long i) {
             launch(s, empty, one);
             detail::check(detail::driver().cuStreamWriteValue64(s.get(), words.device_pointer(), i, 0),
                           "cuStreamWriteValue64", std::source_location::current());
             events[i % events.size()].record(s);
           }), 1);
    s.synchronize();
    report("4 KiB pinned H2D + record", fill(g, limit, [&](long i) {
             copy_async(s, dst.span(), std::span<const std::byte>(src.data<std::byte>(), 4096));
             events[i % events.size()].record(s);
           }), 1);
    s.synchronize();
  }
  if (want(2)) {
    std::printf("== 2. launch + record round-robin over gated streams ==\n");
    for (int n : {2, 8, 16, 32, 64, 128}) {
      std::vector<stream> ss;
      std::vector<stream_ref> g;
      for (int i = 0; i < n; ++i) g.push_back(ss.emplace_back(stream::create(ctx)));
      char what[64];
      std::snprintf(what, sizeof what, "%d streams, all gated", n);
      report(what, fill(g, limit, [&](long i) {
               launch(ss[i % n], empty, one);
               events[i % events.size()].record(ss[i % n]);
             }), n);
      for (auto& s : ss) s.synchronize();
    }
  }
  if (want(3)) {
    std::printf("== 3. launch + record round-robin, only the first stream gated ==\n");
    for (int n : {8, 32}) {
      std::vector<stream> ss;
      for (int i = 0; i < n; ++i) ss.emplace_back(stream::create(ctx));
      char what[64];
      std::snprintf(what, sizeof what, "%d streams, one gated", n);
      report(what, fill({ss[0]}, limit, [&](long i) {
               launch(ss[i % n], empty, one);
               events[i % events.size()].record(ss[i % n]);
             }), n);
      for (auto& s : ss) s.synchronize();
    }
  }
  return 0;
}
