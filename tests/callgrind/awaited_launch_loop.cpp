// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Instructions per awaited launch, for callgrind (tests/callgrind/check_instructions.cmake): a closed loop of
// `co_await async_launch` on the simulated driver, one io thread, passes on the poller thread. After a warm-up the
// counters are zeroed and, after the measured launches, dumped: the io thread's count (callgrind's thread 1, with
// --separate-threads=yes) is what an awaited launch costs the thread that awaits it — initiation, admission, the
// launch and the record through the simulated driver's calls, attaching the wait, and the completion's delivery and
// the coroutine's resumption. The poller thread's passes are left out: how many find the work still pending depends
// on the simulated device thread's timing, so they are not deterministic; everything counted is.
//
// With a stream count it runs the bench's shape instead (bench/async_io/async_io_bench.cpp): 64 coroutines over that
// many streams, each `co_await async_launch` in turn; `raw` runs bench::closed_loop::by_host_word's loop (launch +
// cuStreamWriteValue64, completion by reading the word) on the same driver, the ceiling to compare with. Neither is a
// CTest figure (how many completions a pass finds together depends on the device thread's timing); they are for
// tests/callgrind/own_instructions.py, which splits our instructions from the simulated driver's.
//
// Usage: awaited_launch_loop [launches [streams [raw]]]   (CUASYNC_LIBCUDA names the simulated driver)
#include <cuasync/async_io.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/driver/detail/driver_api.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";
constexpr int warm_up = 500;
constexpr int coroutines = 64;  // the bench's

// by_host_word's loop: `slots` launches in flight over the streams, each relaunched when its word is written.
void raw_host_word(const std::vector<stream>& ss, const kernel_ref& k, std::uint32_t* p, int launches) {
  pinned_buffer words = pinned_buffer::allocate(ss.front().context(), coroutines * sizeof(std::uint64_t));
  auto* host = words.data<volatile std::uint64_t>();
  for (int i = 0; i < coroutines; ++i) host[i] = 0;
  const CUdeviceptr dev = words.device_pointer();
  std::vector<std::uint64_t> want(coroutines, 0);
  std::uint64_t seq = 0;
  const int n = static_cast<int>(ss.size());
  auto submit = [&](int i) {
    launch(ss[i % n], k, {.grid = 1, .block = 1}, p, std::uint32_t{1}, std::uint32_t{1});
    want[i] = ++seq;
    if (detail::driver().cuStreamWriteValue64(ss[i % n].get(), dev + 8 * i, want[i], 0) != CUDA_SUCCESS)
      throw std::runtime_error("cuStreamWriteValue64 failed");
  };
  for (int i = 0; i < coroutines; ++i) submit(i);
  long long done = 0;
  auto run_until = [&](long long until) {
    while (done < until)
      for (int i = 0; i < coroutines && done < until; ++i)
        if (host[i] >= want[i]) {
          ++done;
          submit(i);
        }
  };
  run_until(warm_up);
  CALLGRIND_ZERO_STATS;
  run_until(warm_up + launches);
  CALLGRIND_DUMP_STATS_AT("awaited launches");
  for (auto& s : ss) s.synchronize();
}
}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 3000;
  const int streams = argc > 2 ? std::atoi(argv[2]) : 0;  // 0: one coroutine on one stream (the CTest figure)
  const bool raw = argc > 3 && std::string_view(argv[3]) == "raw";
  if (launches <= 0 || streams < 0) {
    std::fprintf(stderr, "usage: awaited_launch_loop [launches > 0 [streams [raw]]]\n");
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
    if (streams > 0) {
      std::vector<stream> ss;
      for (int i = 0; i < streams; ++i) ss.push_back(stream::create(rt->context()));
      if (raw) {
        raw_host_word(ss, k, p, launches);
      } else {
        asio::io_context io;  // the default policy, as the bench has it
        long long started = 0, finished = 0;
        for (int c = 0; c < coroutines; ++c)
          asio::co_spawn(
              io,
              [&, c]() -> asio::awaitable<void> {
                while (started < warm_up + launches) {
                  ++started;
                  co_await async_launch(ss[c % streams], k, {.grid = 1, .block = 1}, p, std::uint32_t{1},
                                        std::uint32_t{1});
                  if (++finished == warm_up) CALLGRIND_ZERO_STATS;
                  if (finished == warm_up + launches) CALLGRIND_DUMP_STATS_AT("awaited launches");
                }
              },
              [](std::exception_ptr e) {
                if (e) std::rethrow_exception(e);
              });
        io.run();
      }
      const long long total = static_cast<long long>(*p);
      if (total < warm_up + launches) {
        std::fprintf(stderr, "awaited_launch_loop: %lld launches ran, %d expected\n", total, warm_up + launches);
        return 1;
      }
      std::printf("awaited_launch_loop: %d launches measured after %d, %d streams%s\n", launches, warm_up, streams,
                  raw ? ", raw host words" : "");
      return 0;
    }
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
