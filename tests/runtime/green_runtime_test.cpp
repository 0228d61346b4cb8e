// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A device_runtime on a green context (driver/green_context.hpp): adopted as any foreign context, with streams,
// modules and memory of its own on the green context's SMs.
#include <cuasync/driver/green_context.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/stream_pool.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <algorithm>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("a device runtime on a green context has its own streams and runs its kernels",
          "[runtime][green_context][gpu]") {
  const device dev = device::get(0);
  const unsigned total = static_cast<unsigned>(dev.properties().multiprocessor_count);
  auto [small, large] = green_context::split(dev, total / 4);
  for (const green_context* g : {&small, &large}) {
    INFO(g->sm_count() << " SMs");
    auto rt = device_runtime::adopt(g->context());  // the green context outlives the runtime
    CHECK(rt->context() == g->context());
    const stream_ref s = rt->streams().next();
    CHECK(s.context() == g->context());
    module m = module::load(g->context(), test::kernels_fatbin(), "test_kernels.fatbin");
    constexpr int n = 1 << 16;
    device_buffer d = device_buffer::allocate(g->context(), n * sizeof(int));
    memset_async(s, d.span(), 0);
    launch(s, m.kernel("add_value"), {.grid = n / 256, .block = 256}, d.data<int>(), n, 3);
    std::vector<int> host(n);
    copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
    s.synchronize();
    CHECK(std::count(host.begin(), host.end(), 3) == n);
  }
}
