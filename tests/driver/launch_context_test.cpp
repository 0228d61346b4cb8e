// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A launch on a stream of its own needs no current context: the driver launches in the stream's context, which must
// be the kernel's. So `launch` pushes none on a thread without one (an io thread that never made a context current
// paid a push and a pop per launch), and pushes the kernel's for the default streams, which name no context, and when
// a driver refuses the launch for having none current.
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/stream.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "sim_capture.hpp"
#include "simulated_driver.hpp"

#include <cstdint>
#include <exception>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;
using cuasync::detail::driver;

namespace {
CUcontext current() {
  CUcontext c = nullptr;
  REQUIRE(driver().cuCtxGetCurrent(&c) == CUDA_SUCCESS);
  return c;
}

// Runs `f` on a new thread (no context current there) and rethrows what it threw.
template <class F>
void on_fresh_thread(F&& f) {
  std::exception_ptr failure;
  std::thread t([&] {
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  t.join();
  if (failure) std::rethrow_exception(failure);
}

long calls_here(const char* entry) {
  const long n = test::simulated_calls_here(entry);
  REQUIRE(n >= 0);
  return n;
}
}  // namespace

TEST_CASE("a launch from a thread with no current context runs in its stream's context", "[driver][launch][gpu]") {
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  device_buffer out = device_buffer::allocate(ctx, 2 * sizeof(int));
  const kernel_ref write_to = test::kernels().kernel("write_to");
  pinned_buffer host = pinned_buffer::allocate(ctx, 2 * sizeof(int));
  on_fresh_thread([&] {
    REQUIRE(current() == nullptr);
    launch(s, write_to, {.grid = 1, .block = 1}, out.data<int>(), 41);
    CHECK(current() == nullptr);  // nothing left current behind the caller's back
    // The legacy stream names no context: the kernel's is made current for the launch, and popped after.
    launch(stream_ref(CU_STREAM_LEGACY, ctx), write_to, {.grid = 1, .block = 1},
           out.data<int>() + 1, 42);
    CHECK(current() == nullptr);
    s.synchronize();
  });
  {
    scoped_context here(ctx.get());
    REQUIRE(driver().cuCtxSynchronize() == CUDA_SUCCESS);
  }
  copy_async(s, host.as_span<int>(), out.span());
  s.synchronize();
  CHECK(std::vector<int>(host.as_span<int>().begin(), host.as_span<int>().end()) == std::vector<int>{41, 42});
}

TEST_CASE("a launch on a stream of its own pushes no context; a driver that wants one current gets it",
          "[.simulated][driver][launch]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  module m = module::load(ctx, std::string_view(test::sim_u32_ptx), "launch_context.ptx");
  device_buffer b = device_buffer::allocate(ctx, sizeof(std::uint32_t));
  memset_async(s, b.span(), 0);
  const kernel_ref add = m.kernel("sim_add_u32");  // looked up here: the look-up makes the context current
  auto needs_current = reinterpret_cast<void (*)(int)>(
      test::simulated_driver_symbol("fake_cuda_launch_needs_current_context"));
  REQUIRE(needs_current);
  on_fresh_thread([&] {
    REQUIRE(current() == nullptr);
    const long pushes = calls_here("cuCtxPushCurrent");
    launch(s, add, {.grid = 1, .block = 1}, b.get(), 1u, 1u);
    CHECK(calls_here("cuCtxPushCurrent") == pushes);  // none: the stream names the context
    needs_current(1);
    try {
      launch(s, add, {.grid = 1, .block = 1}, b.get(), 1u, 2u);
    } catch (...) {
      needs_current(0);
      throw;
    }
    needs_current(0);
    CHECK(calls_here("cuCtxPushCurrent") == pushes + 1);  // refused without one: tried again with the kernel's
    CHECK(current() == nullptr);
    // The legacy stream names none: the kernel's context is pushed for it.
    launch(stream_ref(CU_STREAM_LEGACY, ctx), add, {.grid = 1, .block = 1}, b.get(), 1u, 4u);
    CHECK(calls_here("cuCtxPushCurrent") == pushes + 2);
    CHECK(current() == nullptr);
  });
  s.synchronize();
  {
    scoped_context here(ctx.get());
    REQUIRE(driver().cuCtxSynchronize() == CUDA_SUCCESS);
  }
  pinned_buffer host = pinned_buffer::allocate(ctx, sizeof(std::uint32_t));
  copy_async(s, host.as_span<std::uint32_t>(), b.span());
  s.synchronize();
  CHECK(host.as_span<std::uint32_t>()[0] == 7u);
}
