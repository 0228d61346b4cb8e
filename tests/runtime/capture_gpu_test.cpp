// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 30's acceptance from C++: a JIT kernel, a tracked buffer handed between two streams and a pinned copy, issued
// inside the caller's own cuStreamBeginCapture (global mode, as torch.cuda.graph's default), the capture checked valid
// after every cuasync call, the graph replayed 10,000 times (CUASYNC_CAPTURE_REPLAYS) with the right data each time.
// [gpu]: on the H200; the simulated driver runs it too (CUASYNC_LIBCUDA, FAKE_CUDA_COMPUTE_CAPABILITY=95: the kernel
// comes as PTX, which it loads, and it runs sim_add_u32 by name).
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/launch.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

using namespace cuasync;
using cuasync::detail::driver;

namespace {
const char* add_source = R"(
extern "C" __global__ void sim_add_u32(unsigned* p, unsigned n, unsigned value) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += value;
}
)";
bool active(stream_ref s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return driver().cuStreamIsCapturing(s.get(), &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}
}  // namespace

TEST_CASE("a JIT kernel, a tracked buffer's hand-off and a pinned copy captured from C++ replay 10,000 times",
          "[runtime][gpu][capture]") {
  auto rt = runtime::device_runtime::for_device(0);
  context_ref ctx = rt->context();
  kernel_ref add = rt->kernel(jit::program("capture_add.cu", add_source), "sim_add_u32");
  stream a = stream::create(ctx), b = stream::create(ctx);
  constexpr unsigned n = 256;
  pinned_buffer host = pinned_buffer::allocate(ctx, n * sizeof(std::uint32_t));
  const std::span<std::uint32_t> out = host.as_span<std::uint32_t>();
  std::optional<runtime::tracked_buffer> held = runtime::tracked_buffer::allocate(*rt, a, n * sizeof(std::uint32_t));
  runtime::tracked_buffer& x = *held;
  a.synchronize();
  const launch_config cfg{.grid = 1, .block = n};

  REQUIRE(driver().cuStreamBeginCapture(a.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  memset_async(a, x.span(), 0);
  CHECK(active(a));
  runtime::launch(a, add, cfg, runtime::read_writes(x), n, 1u);
  CHECK(active(a));
  runtime::launch(b, add, cfg, runtime::read_writes(x), n, 2u);  // b waits for a's write: it joins the capture
  CHECK(active(a));
  CHECK(active(b));
  runtime::launch(a, add, cfg, runtime::read_writes(x), n, 4u);  // a waits for b's: joined back
  CHECK(active(a));
  copy_async(a, out, x.span());
  CHECK(active(a));
  CUgraph g = nullptr;
  REQUIRE(driver().cuStreamEndCapture(a.get(), &g) == CUDA_SUCCESS);
  CHECK_FALSE(active(b));
  CUgraphExec e = nullptr;
  // The driver instantiates in the current context (CUDA_ERROR_INVALID_CONTEXT without one): a framework's thread
  // has its own current; this one makes the runtime's current.
  const scoped_context current(ctx);
  REQUIRE(driver().cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);

  const char* env = std::getenv("CUASYNC_CAPTURE_REPLAYS");
  const long replays = env ? std::atol(env) : 10000;
  long wrong = 0;
  for (long i = 0; i < replays && wrong == 0; ++i) {
    std::fill(out.begin(), out.end(), 0xeeeeeeeeu);
    REQUIRE(driver().cuGraphLaunch(e, a.get()) == CUDA_SUCCESS);
    a.synchronize();
    wrong += std::count_if(out.begin(), out.end(), [](std::uint32_t v) { return v != 7; });
  }
  CHECK(wrong == 0);
  WARN(replays << " graph launches, " << wrong << " wrong words");
  driver().cuGraphExecDestroy(e);
  driver().cuGraphDestroy(g);
  held.reset();  // its free after the capture waits for no captured use
  a.synchronize();
  CHECK_FALSE(ctx.take_deferred_error());
}
