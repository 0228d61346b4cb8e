// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Whether an io thread is ever stalled by a cold path (run it as a fresh process: part 1 is the process's first
// pageable copies). A 1 ms steady_timer ticks on the io thread; each part prints the longest gap between ticks:
//   1. the first awaited pageable copies of the process, 64 MiB + 3 bytes to the device and back, each behind a
//      300 ms kernel (the staging ring is allocated on the background thread meanwhile);
//   2. device_buffers (cuMemFree, which waits for the device to be idle) destroyed in coroutines while 200 ms
//      kernels run on other streams (the reaper frees them);
//   3. 100,000 coroutines over 64 streams, 8 of them behind 300 ms kernels, started 25 at a time.
// Usage: cuasync_cold_paths_probe [parts, e.g. 13]. The acceptance is a longest gap <= 2 ms in each part.
#include <cuasync/async_io.hpp>
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include "../../tests/async_io/gap_meter.hpp"
#include "gap_stacks.hpp"
#include "gpu.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;

namespace {
const launch_config one{.grid = 1, .block = 1};

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

double since_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void first_pageable_copies() {
  auto rt = runtime::device_runtime::for_device(0);  // no warm-up: the ring is made at the first copy
  stream s = stream::create(rt->context());
  constexpr std::size_t size = (std::size_t{64} << 20) + 3;
  const std::vector<std::byte> src = test::random_bytes(size, 64);
  std::vector<std::byte> back(size, std::byte{0});
  device_buffer dev = device_buffer::allocate(rt->context(), size);
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  asio::io_context io;
  test::gap_meter gaps(io);
  const auto t0 = std::chrono::steady_clock::now();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        launch(s, sleep, one, 300'000'000ull);
        co_await async_copy(*rt, s, dev.span(), std::span<const std::byte>(src));
        launch(s, sleep, one, 300'000'000ull);
        co_await async_copy(*rt, s, std::span<std::byte>(back), dev.span());
        gaps.stop();
      },
      rethrow);
  gaps.start();
  io.run();
  const bool same = std::memcmp(back.data(), src.data(), size) == 0;
  std::printf("1. first pageable copies (64 MiB + 3, H2D then D2H, each behind 300 ms): longest io gap %.3f ms over "
              "%d ticks, %.1f ms in all, data %s\n",
              gaps.longest_ms(), gaps.ticks(), since_ms(t0), same ? "ok" : "WRONG");
}

void frees_behind_long_kernels() {
  context_ref ctx = test::ctx();
  constexpr int coroutines = 16;
  std::vector<stream> ss;
  for (int i = 0; i < 4; ++i) ss.push_back(stream::create(ctx));
  std::vector<device_buffer> buffers;
  for (int i = 0; i < coroutines; ++i) buffers.push_back(device_buffer::allocate(ctx, 1 << 20));
  kernel_ref sleep = test::kernels().kernel("sleep_ns"), fill = test::kernels().kernel("fill_iota");
  const deferred_free_stats before = deferred_frees();
  asio::io_context io;
  test::gap_meter gaps(io);
  int finished = 0;
  for (int c = 0; c < coroutines; ++c)
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          stream_ref s = ss[c % ss.size()];
          device_buffer mine = std::move(buffers[c]);
          launch(ss[(c + 1) % ss.size()], sleep, one, 200'000'000ull);  // the device is busy when it is freed
          co_await async_launch(s, fill, one, mine.data<int>(), 1, c);
          mine = device_buffer();  // cuMemFree: here it would wait for the 200 ms kernels
          if (++finished == coroutines) gaps.stop();
        },
        rethrow);
  gaps.start();
  io.run();
  drain_deferred_frees();
  std::printf("2. %d device_buffers freed in coroutines behind 200 ms kernels: longest io gap %.3f ms over %d ticks; "
              "%llu frees made by the reaper\n",
              coroutines, gaps.longest_ms(), gaps.ticks(),
              static_cast<unsigned long long>(deferred_frees().done - before.done));
}

void many_coroutines() {
  constexpr int coroutines = 100'000, streams_n = 64, long_streams = 8;
  context_ref ctx = test::ctx();
  std::vector<stream> ss;
  for (int i = 0; i < streams_n; ++i) ss.push_back(stream::create(ctx));
  device_buffer dev = device_buffer::allocate(ctx, coroutines * sizeof(int));
  pinned_buffer out = pinned_buffer::allocate(ctx, coroutines * sizeof(int));
  std::memset(out.get(), 0xff, out.size());
  kernel_ref fill = test::kernels().kernel("fill_iota"), add = test::kernels().kernel("add_value");
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  auto pool = event_pool::for_context(ctx);
  asio::io_context io;
  test::gap_meter gaps(io);
  int finished = 0;
  std::uint32_t most_waiting = 0;
  for (int i = 0; i < long_streams; ++i)
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> { co_await async_launch(ss[i], sleep, one, 300'000'000ull); },
                   rethrow);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < coroutines; ++i) {
          asio::co_spawn(
              io,
              [&, i]() -> asio::awaitable<void> {
                stream_ref s = ss[i % streams_n];
                int* p = dev.data<int>() + i;
                co_await async_launch(s, fill, one, p, 1, i);
                co_await async_launch(s, add, one, p, 1, 7);
                co_await async_copy(s, out.bytes().subspan(i * sizeof(int), sizeof(int)),
                                    device_span{dev.get() + i * sizeof(int), sizeof(int)});
                most_waiting = std::max(most_waiting, pool->waiting_for_admission());
                if (++finished == coroutines) gaps.stop();
              },
              rethrow);
          if (i % 25 == 24) co_await asio::post(io, asio::use_awaitable);
        }
      },
      rethrow);
  const auto t0 = std::chrono::steady_clock::now();
  gaps.start();
  // CUASYNC_PROBE_GAP_STACKS=1: the io thread's call stack during each gap over 3 ms (bench/async_io/gap_stacks.hpp).
  std::unique_ptr<bench::gap_stacks> stacks;
  // CUASYNC_PROBE_GAP_STACKS=profile: a stack each 0.5 ms of every gap over 2 ms (up to 400), to see where gaps go.
  if (const char* v = std::getenv("CUASYNC_PROBE_GAP_STACKS"); v && *v == '1')
    stacks = std::make_unique<bench::gap_stacks>(gaps, std::chrono::milliseconds(3));
  else if (v && std::string_view(v) == "profile")
    stacks = std::make_unique<bench::gap_stacks>(gaps, std::chrono::milliseconds(2), 400, true);
  io.run();
  stacks.reset();
  const completion_statistics st = asio::use_service<completion_service>(io).stats();
  std::printf("   passes %llu (executor %llu), queries %llu, completed %llu, handoffs %llu, batches %llu\n",
              static_cast<unsigned long long>(st.passes), static_cast<unsigned long long>(st.executor_passes),
              static_cast<unsigned long long>(st.queries), static_cast<unsigned long long>(st.completed),
              static_cast<unsigned long long>(st.handoffs), static_cast<unsigned long long>(st.batches));
  int wrong = 0;
  for (int i = 0; i < coroutines; ++i) wrong += out.data<int>()[i] != i + 7;
  std::printf("3. %d coroutines over %d streams (%d behind 300 ms kernels): longest io gap %.3f ms over %d ticks, "
              "%.1f ms in all, most waiting for admission %u, %d wrong\n",
              coroutines, streams_n, long_streams, gaps.longest_ms(), gaps.ticks(), since_ms(t0), most_waiting, wrong);
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto want = [&](int part) { return argc < 2 || std::strchr(argv[1], '0' + part) != nullptr; };
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_cold_paths_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  if (want(1)) first_pageable_copies();
  if (want(2)) frees_behind_long_kernels();
  if (want(3)) many_coroutines();
  return 0;
}
