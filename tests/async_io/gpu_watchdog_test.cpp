// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The io-thread watchdog on the GPU (issue 12's acceptance): a device_buffer freed inside a coroutine behind a 200 ms
// kernel blocks the io thread in cuMemFree, and the report names it; the same coroutine with a stream-ordered pool
// buffer, or freeing after the kernel completed, is never reported.
// [timing]: wall-clock stalls against the default threshold (20 ms).
#include <cuasync/async_io.hpp>
#include <cuasync/async_io/io_watchdog.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include "gpu.hpp"
#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::eventually;

namespace {
const launch_config one{.grid = 1, .block = 1};
constexpr unsigned long long long_kernel_ns = 200'000'000;  // 200 ms

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

bool has_ended(const io_watchdog& w) {
  for (const stall_report& r : w.reports())
    if (r.ended) return true;
  return false;
}
}  // namespace

// Outside any namespace and not inlined: its exported name is the frame the report must name.
// The thread is unmarked first: an io thread hands blocking frees to the reaper (driver/blocking_free.hpp), so only
// code that opted out (or a handler async_io does not run) can still block in cuMemFree, and the watchdog names it.
[[gnu::noinline]] void watchdog_gpu_free_behind_kernel(stream_ref s, kernel_ref sleep) {
  const bool was = set_thread_must_not_block(false);
  {
    device_buffer b = device_buffer::allocate(test::ctx(), 1 << 20);
    launch(s, sleep, one, long_kernel_ns);
  }  // cuMemFree: waits for the device to be idle, on the io thread
  set_thread_must_not_block(was);
}

TEST_CASE("the watchdog names cuMemFree when a coroutine frees a device_buffer behind a long kernel",
          "[async_io][gpu][watchdog][timing]") {
  stream s = stream::create(test::ctx());
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  asio::io_context io;
  io_watchdog w(io);  // the default threshold and sink: the lines go to standard error
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(s, asio::use_awaitable);
        watchdog_gpu_free_behind_kernel(s, sleep);
      },
      rethrow);
  io.run();
  REQUIRE(eventually([&] { return has_ended(w); }, 5s));
  const std::vector<stall_report> reports = w.reports();
  REQUIRE(reports.size() == 2);
  const stall_report& first = reports[0];
  INFO(first.text());
  CHECK(first.call == "cuMemFree");
  CHECK(first.duration >= io_watchdog::default_threshold);
  REQUIRE_FALSE(first.frames.empty());
  CHECK(first.frames[0].find("watchdog_gpu_free_behind_kernel") == 0);
  INFO(reports[1].text());
  CHECK(reports[1].ended);
  CHECK(reports[1].call == "cuMemFree");
  CHECK(reports[1].duration >= 100ms);
}

TEST_CASE("the watchdog stays silent when the coroutine frees in stream order or after the kernel",
          "[async_io][gpu][watchdog][timing]") {
  auto rt = runtime::device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  kernel_ref sleep = test::kernels().kernel("sleep_ns");
  {  // warm the pool and the event pool as a service would at start-up
    auto warm = runtime::tracked_buffer::allocate(*rt, s, 1 << 20);
  }
  s.synchronize();
  asio::io_context io;
  io_watchdog w(io);
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_wait(s, asio::use_awaitable);
        {
          auto pooled = runtime::tracked_buffer::allocate(*rt, s, 1 << 20);
          launch(s, sleep, one, long_kernel_ns);
        }  // cuMemFreeAsync: nothing waits
        co_await async_wait(s, asio::use_awaitable);
        {
          device_buffer b = device_buffer::allocate(rt->context(), 1 << 20);
          launch(s, sleep, one, long_kernel_ns);
          co_await async_wait(s, asio::use_awaitable);
        }  // cuMemFree with the device idle
        done = true;
      },
      rethrow);
  io.run();
  REQUIRE(done);
  std::this_thread::sleep_for(2 * io_watchdog::default_threshold);  // a stall's report would be out by now
  for (const stall_report& r : w.reports()) UNSCOPED_INFO(r.text());
  CHECK(w.reports().empty());
}
