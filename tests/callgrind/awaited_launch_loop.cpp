// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Instructions per awaited launch, for callgrind (tests/callgrind/check_instructions.cmake): a closed loop of
// `co_await async_launch` on the simulated driver, one io thread, passes on the poller thread. After a warm-up the
// counters are zeroed and, after the measured launches, dumped: the io thread's count (callgrind's thread 1, with
// --separate-threads=yes) is what an awaited launch costs the thread that awaits it — initiation, admission, the
// launch and the record through the simulated driver's calls, attaching the wait, and the completion's delivery and
// the coroutine's resumption. The poller thread's passes are left out: how many find the work still pending depends
// on the simulated device thread's timing, so they are not deterministic; everything counted is.
//
// Usage: awaited_launch_loop [launches]   (CUASYNC_LIBCUDA names the simulated driver)
#include <cuasync/async_io.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

using namespace cuasync;
namespace asio = boost::asio;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";
constexpr int warm_up = 500;
}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 3000;
  if (launches <= 0) {
    std::fprintf(stderr, "usage: awaited_launch_loop [launches > 0]\n");
    return 2;
  }
  try {
    auto rt = runtime::device_runtime::for_device(0);
    module m = module::load(rt->context(), std::string_view(sim_ptx), "callgrind.ptx");
    const kernel_ref k = m.kernel("sim_add_u32");
    pinned_buffer word = pinned_buffer::allocate(rt->context(), sizeof(std::uint32_t));
    auto* p = word.data<std::uint32_t>();
    *p = 0;
    stream s = stream::create(rt->context());
    asio::io_context io;
    poll_policy policy = poll_policy::balanced();
    policy.mode = poll_mode::poller_thread;
    policy.executor_window = {};  // every pass on the poller thread: none counted on the io thread
    asio::use_service<completion_service>(io).set_policy(policy);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int i = 0; i < warm_up; ++i)
            co_await async_launch(s, k, {.grid = 1, .block = 1}, p, std::uint32_t{1}, std::uint32_t{1});
          CALLGRIND_ZERO_STATS;
          for (int i = 0; i < launches; ++i)
            co_await async_launch(s, k, {.grid = 1, .block = 1}, p, std::uint32_t{1}, std::uint32_t{1});
          CALLGRIND_DUMP_STATS_AT("awaited launches");
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    io.run();
    if (*p != static_cast<std::uint32_t>(warm_up + launches)) {
      std::fprintf(stderr, "awaited_launch_loop: %u launches ran, %d expected\n", *p, warm_up + launches);
      return 1;
    }
    std::printf("awaited_launch_loop: %d launches measured after %d\n", launches, warm_up);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "awaited_launch_loop: %s\n", e.what());
    return 1;
  }
  return 0;
}
