// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What a framework's objects may outlive: a stream lease and a pinned block their runtime, a kernel cache the
// contexts it loaded into. Found by a review on the simulated driver; CTest also runs these there (under the
// sanitizers in CI), where a lease writing into its freed pool or a stale module handle shows.
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/kernel_cache.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>
#include <optional>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("a stream lease and a pinned block outlive their runtime", "[runtime][gpu][lifetime]") {
  std::optional<stream_pool::lease> lease;
  std::optional<pinned_block> block;
  {
    auto rt = device_runtime::create(0);
    lease.emplace(rt->streams().borrow());
    block.emplace(rt->pinned()->allocate(1 << 20));
  }  // the runtime is gone; its pools live on in what was handed out
  std::memset(block->get(), 2, 1 << 20);  // still pinned memory of a live context
  CHECK(static_cast<unsigned char*>(block->get())[(1 << 20) - 1] == 2);
  stream_ref s = *lease;
  CHECK_NOTHROW(s.synchronize());
  block.reset();
  lease.reset();  // back to an idle list whose pool is gone: destroyed with its context still there
}

TEST_CASE("a pinned block that is empty or moved from refuses record_use", "[runtime][lifetime]") {
  pinned_block empty;
  CHECK_THROWS_WITH(empty.record_use(stream_ref()), Catch::Contains("empty"));
}

namespace {
// A kernel the simulated driver runs by name (tests/fake_driver/sim_kernels.cpp) and any GPU compiles.
const char* fill_source = R"(
extern "C" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned value) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}
)";
}  // namespace

TEST_CASE("one kernel cache serves contexts that come and go, a new one under an old one's handle included",
          "[runtime][gpu][lifetime]") {
  const auto& d = detail::driver();
  CUdevice dev = 0;
  detail::check(d.cuDeviceGet(&dev, 0), "cuDeviceGet", std::source_location::current());
  kernel_cache cache(jit::default_compiler());
  const jit::program program("fill.cu", fill_source);
  for (unsigned round = 0; round < 3; ++round) {
    CUcontext raw = nullptr;
    detail::check(d.cuCtxCreate(&raw, 0, dev), "cuCtxCreate", std::source_location::current());
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    {
      const context_ref ctx = context_ref::adopt(raw);
      // PTX: what the simulated driver loads (and any GPU's driver).
      kernel_ref k = cache.kernel(ctx, program, "sim_fill_u32", {}, jit::output_request::ptx);
      stream s = stream::create(ctx);
      device_buffer out = device_buffer::allocate(ctx, 64 * sizeof(unsigned));
      launch(s, k, launch_config{.grid = 1, .block = 64}, out.data<unsigned>(), 64u, 7u + round);
      std::vector<unsigned> host(64);
      copy_async(s, std::span<std::byte>(reinterpret_cast<std::byte*>(host.data()), 64 * sizeof(unsigned)),
                 out.span());
      s.synchronize();
      CHECK(host[0] == 7u + round);
      CHECK(host[63] == 7u + round);
    }
    detail::check(d.cuCtxDestroy(raw), "cuCtxDestroy", std::source_location::current());
  }
}
