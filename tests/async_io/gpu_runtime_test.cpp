// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// async_io on the runtime, on the GPU: an io thread that never waits for the GPU (pageable copies, admission,
// coroutine-friendly memory released behind long kernels), awaited pageable copies byte for byte, tracked buffers in
// awaited launches and copies, admission's order and cancellation.
#include <cuasync/async_io.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <algorithm>

#include "gap_meter.hpp"
#include "gpu.hpp"
#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>
#include <memory>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::eventually;
using cuasync::test::gap_meter;

namespace {
const launch_config one{.grid = 1, .block = 1};
constexpr unsigned long long long_kernel_ns = 300'000'000;  // 300 ms
constexpr double max_gap_ms = 5.0;

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

// Starts `n` coroutines `make(i)` the way a server takes requests: a few at a time, the io thread's other handlers
// running between (starting thousands in one handler is the caller's own burst, not a blocked thread).
template <class Make>
void spawn_gradually(asio::io_context& io, int n, Make make) {
  asio::co_spawn(
      io,
      [&io, n, make]() -> asio::awaitable<void> {
        for (int i = 0; i < n; ++i) {
          asio::co_spawn(io, make(i), rethrow);
          if (i % 25 == 24) co_await asio::post(io, asio::use_awaitable);
        }
      },
      rethrow);
}

// Restores the context's admission bounds when a test that changed them ends.
struct admission_guard {
  std::shared_ptr<event_pool> pool = event_pool::for_context(test::ctx());
  admission_limits saved = pool->get_admission_limits();
  ~admission_guard() { pool->set_admission_limits(saved); }
};
}  // namespace

// [timing]: asserts a gap meter's longest io-thread gap <= 5 ms and >= 300 ticks.
TEST_CASE("awaited 64 MiB pageable copies behind 300 ms kernels never block the io thread", "[async_io][gpu][timing]") {
  auto rt = runtime::device_runtime::for_device(0);
  rt->staging();  // the ring and copy threads exist before the measurement (created once per runtime)
  stream s = stream::create(rt->context());
  constexpr std::size_t size = 64 << 20;
  const std::vector<std::byte> src = test::random_bytes(size, 64);
  std::vector<std::byte> back(size, std::byte{0});
  auto dev = runtime::tracked_buffer::allocate(*rt, s, size);
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  asio::io_context io;
  gap_meter gaps(io);
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        launch(s, sleep, one, long_kernel_ns);  // the copy waits behind it on the stream
        co_await async_copy(s, dev, std::span<const std::byte>(src));
        launch(s, sleep, one, long_kernel_ns);
        co_await async_copy(s, std::span<std::byte>(back), dev);
        done = true;
        gaps.stop();
      },
      rethrow);
  gaps.start();
  io.run();
  REQUIRE(done);
  CHECK(std::memcmp(back.data(), src.data(), size) == 0);
  INFO("longest timer gap " << gaps.longest_ms() << " ms over " << gaps.ticks() << " ticks");
  CHECK(gaps.ticks() >= 300);  // ~600 ms of kernels: the timer kept ticking
  CHECK(gaps.longest_ms() <= max_gap_ms);
}

// [timing]: 5,000 coroutines, and asserts a gap meter's longest io-thread gap <= 5 ms.
TEST_CASE("5,000 coroutines over 32 streams, some behind long kernels: admission waits, the io thread never blocks",
          "[async_io][gpu][timing]") {
  admission_guard guard;
  guard.pool->set_admission_limits({});  // the defaults
  constexpr int coroutines = 5000, streams_n = 32, long_streams = 4;
  std::vector<stream> ss;
  for (int i = 0; i < streams_n; ++i) ss.push_back(stream::create(test::ctx()));
  device_buffer dev = device_buffer::allocate(test::ctx(), coroutines * sizeof(int));
  pinned_buffer out = pinned_buffer::allocate(test::ctx(), coroutines * sizeof(int));
  std::memset(out.get(), 0xff, out.size());
  kernel_ref fill = test::kernels().kernel("fill_iota"), add = test::kernels().kernel("add_value");
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  asio::io_context io;
  gap_meter gaps(io);
  int finished = 0;
  std::uint32_t most_waiting = 0;
  for (int i = 0; i < long_streams; ++i)
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> { co_await async_launch(ss[i], sleep, one, long_kernel_ns); },
                   rethrow);
  spawn_gradually(io, coroutines, [&](int i) {
    return [&, i]() -> asio::awaitable<void> {
          stream_ref s = ss[i % streams_n];
          int* p = dev.data<int>() + i;
          co_await async_launch(s, fill, one, p, 1, i);  // *p = i
          co_await async_launch(s, add, one, p, 1, 7);   // *p = i + 7
          std::span<std::byte> dst = out.bytes().subspan(i * sizeof(int), sizeof(int));
          co_await async_copy(s, dst, dev.subspan(i * sizeof(int), sizeof(int)));
          most_waiting = std::max(most_waiting, guard.pool->waiting_for_admission());
          if (++finished == coroutines) gaps.stop();
    };
  });
  gaps.start();
  io.run();
  REQUIRE(finished == coroutines);
  int wrong = 0;
  for (int i = 0; i < coroutines; ++i) wrong += out.data<int>()[i] != i + 7;
  CHECK(wrong == 0);
  INFO("longest timer gap " << gaps.longest_ms() << " ms; most waiting for admission " << most_waiting);
  CHECK(most_waiting > 0);  // the bound was reached: without it the driver's queues fill and an enqueue blocks
  CHECK(gaps.longest_ms() <= max_gap_ms);
  CHECK(guard.pool->admitted() == 0);
  CHECK(guard.pool->waiting_for_admission() == 0);
}

// [timing]: asserts a gap meter's longest io-thread gap <= 5 ms (and 256 100 ms kernels, ~26 s serialized).
TEST_CASE("tracked buffers and pinned blocks released inside coroutines behind long kernels never block the io thread",
          "[async_io][gpu][timing]") {
  auto rt = runtime::device_runtime::for_device(0);
  std::vector<stream> ss;
  for (int i = 0; i < 8; ++i) ss.push_back(stream::create(rt->context()));
  kernel_ref sleep = test::kernels().kernel("sleep_ns"), fill = test::kernels().kernel("fill_iota");
  {  // warm the pools as a service sizes them at start-up (a pool miss is a cuMemHostAlloc, ~0.7 ms for 1 MiB)
    std::vector<runtime::tracked_buffer> bs;
    std::vector<runtime::pinned_block> ps;
    for (int i = 0; i < 192; ++i) {
      bs.push_back(runtime::tracked_buffer::allocate(*rt, ss[0], 1 << 20));
      ps.push_back(rt->pinned()->allocate(1 << 20));
    }
    bs.clear();
    ss[0].synchronize();
  }
  asio::io_context io;
  gap_meter gaps(io);
  int finished = 0, correct = 0;
  constexpr int coroutines = 64;
  spawn_gradually(io, coroutines, [&](int c) {
    return [&, c]() -> asio::awaitable<void> {
          stream_ref s = ss[c % ss.size()];
          for (int round = 0; round < 4; ++round) {
            auto buffer = runtime::tracked_buffer::allocate(*rt, s, 1 << 20);
            runtime::pinned_block block = rt->pinned()->allocate(1 << 20);
            co_await async_launch(s, fill, one, runtime::writes(buffer), 1, c * 10 + round);
            co_await async_copy(s, block, buffer);
            correct += block.data<int>()[0] == c * 10 + round;
            launch(s, sleep, one, long_kernel_ns / 3);  // 100 ms ahead of the frees below
            // Both released here, while the stream runs the long kernel: a stream-ordered free, a pooled block.
          }
          if (++finished == coroutines) gaps.stop();
    };
  });
  gaps.start();
  io.run();
  REQUIRE(finished == coroutines);
  CHECK(correct == coroutines * 4);
  INFO("longest timer gap " << gaps.longest_ms() << " ms");
  CHECK(gaps.longest_ms() <= max_gap_ms);
}

// [timing]: asserts a gap meter's longest io-thread gap >= 50 ms.
TEST_CASE("the gap meter sees a blocking free: a device_buffer freed behind a long kernel (the control)",
          "[async_io][gpu][timing]") {
  stream s = stream::create(test::ctx());
  asio::io_context io;
  gap_meter gaps(io);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(s, asio::use_awaitable);
        const bool marked = set_thread_must_not_block(false);  // as a thread outside async_io would free it
        {
          device_buffer b = device_buffer::allocate(test::ctx(), 1 << 20);
          launch(s, test::kernels().kernel("sleep_ns"), one, long_kernel_ns / 3);
        }  // cuMemFree: waits for the device to be idle, on the io thread
        set_thread_must_not_block(marked);
        gaps.stop();
      },
      rethrow);
  gaps.start();
  io.run();
  INFO("longest timer gap " << gaps.longest_ms() << " ms");
  CHECK(gaps.longest_ms() >= 50);
}

// [timing]: asserts a gap meter's longest io-thread gap <= 5 ms.
TEST_CASE("a device_buffer freed in a coroutine behind a long kernel is freed by the reaper, not the io thread",
          "[async_io][gpu][timing]") {
  stream s = stream::create(test::ctx());
  asio::io_context io;
  gap_meter gaps(io);
  const deferred_free_stats before = deferred_frees();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(s, asio::use_awaitable);  // resumed by async_io: the thread is marked
        {
          device_buffer b = device_buffer::allocate(test::ctx(), 1 << 20);
          launch(s, test::kernels().kernel("sleep_ns"), one, long_kernel_ns / 3);
        }  // handed to the reaper, whose cuMemFree waits for the kernel
        co_await async_wait(s, asio::use_awaitable);
        gaps.stop();
      },
      rethrow);
  gaps.start();
  io.run();
  drain_deferred_frees();
  INFO("longest timer gap " << gaps.longest_ms() << " ms");
  CHECK(deferred_frees().done >= before.done + 1);
  CHECK(gaps.longest_ms() <= max_gap_ms);
}

TEST_CASE("awaited pageable copies are byte-exact at 1 B, 4 KiB + 1, unaligned offsets and 1 GiB", "[async_io][gpu]") {
  auto rt = runtime::device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  const std::size_t size = GENERATE(std::size_t{1}, std::size_t{4097}, std::size_t{(8 << 20) + 3},
                                    std::size_t{1} << 30);
  const std::size_t offset = GENERATE(std::size_t{0}, std::size_t{3});
  CAPTURE(size, offset);
  const auto src = test::random_bytes(size + offset, static_cast<unsigned>(size * 3 + offset));
  std::vector<std::byte> back(size + offset + 8, std::byte{0});
  device_buffer d = device_buffer::allocate(rt->context(), size + 16);
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        std::span<const std::byte> in = std::span(src).subspan(offset, size);
        std::span<std::byte> out = std::span(back).subspan(offset, size);
        device_span on_device = d.subspan(offset, size);
        co_await async_copy(s, on_device, in);
        co_await async_copy(s, out, on_device);
      },
      rethrow);
  io.run();
  CHECK(std::memcmp(back.data() + offset, src.data() + offset, size) == 0);
  CHECK(back[offset + size] == std::byte{0});
  if (offset) CHECK(back[offset - 1] == std::byte{0});
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("an awaited launch with tracked buffers waits for their writer on another stream", "[async_io][gpu][concurrent]") {
  auto rt = runtime::device_runtime::for_device(0);
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  constexpr int n = 1024;
  auto x = runtime::tracked_buffer::allocate(*rt, a, n * sizeof(int));
  auto y = runtime::tracked_buffer::allocate(*rt, a, n * sizeof(int));
  runtime::pinned_block in = rt->pinned()->allocate(n * sizeof(int)), out = rt->pinned()->allocate(n * sizeof(int));
  for (int i = 0; i < n; ++i) in.data<int>()[i] = 3 * i + 1;
  test::gate gate;
  gate.close(a);  // x's writer (the copy on a) cannot run before the test opens the gate
  asio::io_context io;
  bool copied = false, launched = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await async_copy(a, x, in);
    copied = true;
  }, rethrow);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await async_launch(b, test::kernels().kernel("twice_plus_one"), {.grid = n / 256, .block = 256},
                          runtime::reads(x), runtime::writes(y), n);
    launched = true;
    co_await async_copy(b, out, y);
  }, rethrow);
  const auto until = std::chrono::steady_clock::now() + 100ms;
  while (std::chrono::steady_clock::now() < until) io.run_for(5ms);
  CHECK_FALSE(copied);
  CHECK_FALSE(launched);  // b waits (on the device) for a's copy into x
  gate.open();
  io.run();
  CHECK(copied);
  CHECK(launched);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out.data<int>()[i] != (3 * i + 1) * 2 + 1;
  CHECK(wrong == 0);
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("admission: past the bound operations wait in order; cancelled waiters never run", "[async_io][gpu][concurrent]") {
  admission_guard guard;
  guard.pool->set_admission_limits({.per_stream = 4, .per_context = 8});
  stream s = stream::create(test::ctx());
  pinned_buffer counter = pinned_buffer::allocate(test::ctx(), sizeof(int));
  *counter.data<int>() = 0;
  test::gate gate;
  gate.close(s);
  asio::io_context io;
  constexpr int ops = 20;
  std::vector<int> order;
  std::vector<std::error_code> results(ops);
  std::vector<asio::cancellation_signal> cancel(ops);
  kernel_ref add = test::kernels().kernel("add_value");
  for (int i = 0; i < ops; ++i)
    async_launch(s, add, one, counter.data<int>(), 1, 1,
                 asio::bind_executor(io, asio::bind_cancellation_slot(cancel[i].slot(), [&, i](std::error_code ec) {
                                       results[i] = ec;
                                       order.push_back(i);
                                     })));
  io.poll();
  CHECK(guard.pool->admitted() == 4);  // the stream's bound
  CHECK(guard.pool->waiting_for_admission() == ops - 4);
  for (int i : {5, 9, 10, 19}) cancel[i].emit(asio::cancellation_type::terminal);  // waiting: never launched
  io.poll();
  CHECK(guard.pool->waiting_for_admission() == ops - 8);
  gate.open();
  io.run();
  REQUIRE(order.size() == ops);
  int launched = 0;
  std::vector<int> completed;
  for (int i = 0; i < ops; ++i) {
    if (i == 5 || i == 9 || i == 10 || i == 19) {
      CHECK(results[i] == std::errc::operation_canceled);
    } else {
      CHECK_FALSE(results[i]);
      ++launched;
    }
  }
  for (int i : order)
    if (!results[i]) completed.push_back(i);
  CHECK(std::is_sorted(completed.begin(), completed.end()));  // stream order
  s.synchronize();
  CHECK(*counter.data<volatile int>() == launched);  // the cancelled ones never ran
  CHECK(guard.pool->admitted() == 0);
}

// [timing]: asserts a gap meter's longest io-thread gap <= 5 ms.
TEST_CASE("the slot pipeline driven from a coroutine: every batch right, slots reused only when done, io thread free",
          "[async_io][gpu][timing]") {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr int n = 1 << 16, batches = 48;
  runtime::slot_pipeline pipe(*rt, {.slots = 3, .input_bytes = n * sizeof(int), .output_bytes = n * sizeof(int)});
  kernel_ref k = test::kernels().kernel("twice_plus_one");
  std::vector<int> wrong(batches, -1);
  std::vector<std::size_t> posted;
  asio::io_context io;
  gap_meter gaps(io);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_run(
            pipe, batches,
            [&](std::size_t b, runtime::pipeline_slot& s) {
              for (int i = 0; i < n; ++i) s.input.data<int>()[i] = i + int(b);
            },
            [&](std::size_t, runtime::pipeline_slot& s) {
              launch(s.stream, k, {.grid = n / 256, .block = 256}, s.input_device.data<const int>(),
                     s.output_device.data<int>(), n);
            },
            [&](std::size_t b, runtime::pipeline_slot& s) {
              int bad = 0;
              for (int i = 0; i < n; ++i) bad += s.output.data<int>()[i] != (i + int(b)) * 2 + 1;
              wrong[b] = bad;
              posted.push_back(b);
            });
        gaps.stop();
      },
      rethrow);
  gaps.start();
  io.run();
  CHECK(std::all_of(wrong.begin(), wrong.end(), [](int w) { return w == 0; }));
  CHECK(std::is_sorted(posted.begin(), posted.end()));
  CHECK(posted.size() == batches);
  INFO("longest timer gap " << gaps.longest_ms() << " ms");
  CHECK(gaps.longest_ms() <= max_gap_ms);
}
