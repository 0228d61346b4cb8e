// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// async_compile over a compiler that sends its misses to a compile farm: awaited compiles resume on the io thread,
// hold no pool thread while a worker compiles, and meet the compiler's caches. No GPU.
#include <cuasync/async_io/async_compile.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>
#include <vector>

using namespace cuasync;
namespace asio = boost::asio;

namespace {

std::string from_here(const char* relative) {
  return (std::filesystem::canonical("/proc/self/exe").parent_path() / relative).lexically_normal().string();
}

jit::farm_options farm_options(unsigned workers) {
  jit::farm_options o;
  o.workers = workers;
  o.worker_path = from_here(CUASYNC_TEST_JIT_WORKER);
  return o;
}

jit::program numbered(int i) {
  return jit::program("awaited_" + std::to_string(i) + ".cu",
                      "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = " + std::to_string(i) + "; }\n");
}

}  // namespace

TEST_CASE("awaited compiles through a farm-backed compiler resume on the io thread", "[async_io][farm][nvrtc]") {
  jit::compile_farm farm(farm_options(2));
  jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
  compiler.use_farm(farm);
  asio::thread_pool pool(1);  // one front thread for 8 compiles in flight: a miss must not hold it
  asio::io_context io;
  const auto io_thread = std::this_thread::get_id();
  constexpr int n = 8;
  int compiled = 0, resumed_elsewhere = 0, errors = 0, hits = 0;
  for (int i = 0; i < n; ++i)
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          const jit::target t{jit::output_kind::cubin, 90};
          const jit::compile_options options;  // named: see tokens_test.cpp on g++ 12 and temporaries
          jit::compile_result r = co_await async_compile(compiler, numbered(i), t, options, pool, asio::use_awaitable);
          resumed_elsewhere += std::this_thread::get_id() != io_thread;
          compiled += r.outcome == jit::cache_outcome::miss && !r->image.empty();
          jit::compile_result again =
              co_await async_compile(compiler, numbered(i), t, options, pool, asio::use_awaitable);
          hits += again.outcome == jit::cache_outcome::memory_hit && again.program == r.program;
          try {
            jit::program bad("bad_" + std::to_string(i) + ".cu", "not CUDA at all");
            co_await async_compile(compiler, std::move(bad), t, options, pool, asio::use_awaitable);
          } catch (const jit::compile_error&) {
            ++errors;
          }
        },
        asio::detached);
  io.run();
  CHECK(compiled == n);
  CHECK(hits == n);
  CHECK(errors == n);
  CHECK(resumed_elsewhere == 0);
  CHECK(farm.stats().compiles == n);
  CHECK(farm.stats().failures == n);
  CHECK_FALSE(farm.stats().in_process);
}

TEST_CASE("async_compile on a farm itself is an uncached compile", "[async_io][farm][nvrtc]") {
  jit::compile_farm farm(farm_options(1));
  const jit::target t{jit::output_kind::ptx, 80};
  const jit::compile_options options;
  auto first = async_compile(farm, numbered(1), t, options, asio::use_future);
  auto second = async_compile(farm, numbered(1), t, options, asio::use_future);
  const jit::compile_result a = first.get(), b = second.get();
  CHECK(a.outcome == jit::cache_outcome::miss);
  CHECK(b.outcome == jit::cache_outcome::miss);
  CHECK(a->image == b->image);
  CHECK(farm.stats().compiles == 2);
  // Bad options are refused before anything is queued, and still arrive as the completion.
  jit::compile_options refused;
  refused.extra.push_back("-arch=sm_80");
  CHECK_THROWS_AS(async_compile(farm, numbered(2), t, refused, asio::use_future).get(), cuda_error);
}

#ifdef CUASYNC_TEST_NVRTC_SHIM
TEST_CASE("a compile held by a farm worker holds no pool thread", "[async_io][farm][nvrtc]") {
  jit::farm_options o = farm_options(2);
  o.environment.push_back("CUASYNC_LIBNVRTC=" + from_here(CUASYNC_TEST_NVRTC_SHIM));  // it hangs for the marker
  o.compile_timeout = std::chrono::milliseconds(1500);
  jit::compile_farm farm(o);
  farm.warm_up();  // NVRTC's start-up before the timeout counts (the good compile must not time out)
  farm.wait_until_ready();
  jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
  compiler.use_farm(farm);
  asio::thread_pool pool(1);
  asio::io_context io;
  std::vector<std::string> order;
  const jit::target t{jit::output_kind::cubin, 90};
  const jit::compile_options options;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        jit::program hang("hang.cu", "// CUASYNC_FARM_TEST_HANG\nextern \"C\" __global__ void k() {}\n");
        try {
          co_await async_compile(compiler, std::move(hang), t, options, pool, asio::use_awaitable);
          order.push_back("hang compiled");
        } catch (const jit::farm_worker_error& e) {
          order.push_back(e.timed_out() ? "hang timed out" : "hang failed");
        }
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await async_compile(compiler, numbered(50), t, options, pool, asio::use_awaitable);
        order.push_back("good");
      },
      asio::detached);
  io.run();
  // Had the hanging compile held the pool's one thread, the good one would have started only after its timeout.
  CHECK(order == std::vector<std::string>{"good", "hang timed out"});
}
#endif
