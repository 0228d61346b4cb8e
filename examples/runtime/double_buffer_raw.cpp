// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The same double buffer as double_buffer.cpp, with raw Driver API calls (only the kernel comes from cuasync's
// JIT), for comparison: every stream, event, pinned and device buffer is created, ordered, synchronised and freed by
// hand, and every call's result must be checked.
#include <cuasync/runtime/device_runtime.hpp>

#include "../kernels/double_buffer_kernel.hpp"

#include "../kernels/cu_check.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace cuasync;

static const char* source = cuasync::examples::double_buffer_kernel_source;


int main() {
  constexpr int batch_size = 1 << 20, num_batches = 128, kStages = 2;
  constexpr std::size_t bytes = batch_size * sizeof(float);
  auto rt = runtime::device_runtime::for_device(0);
  CUfunction my_kernel = rt->kernel(jit::program("double_buffer_raw", source), "my_kernel").get();
  const auto& d = cuasync::detail::driver();
  CU_CHECK(d.cuCtxPushCurrent(rt->context().get()));

  CUstream streams[kStages];
  CUevent done[kStages];
  float *h_in[kStages], *h_out[kStages];
  CUdeviceptr d_in[kStages], d_out[kStages];
  int last_batch[kStages] = {-1, -1};
  for (int i = 0; i < kStages; ++i) {
    CU_CHECK(d.cuStreamCreateWithPriority(&streams[i], CU_STREAM_NON_BLOCKING, 0));
    CU_CHECK(d.cuEventCreate(&done[i], CU_EVENT_DISABLE_TIMING));
    CU_CHECK(d.cuMemHostAlloc(reinterpret_cast<void**>(&h_in[i]), bytes, 0));
    CU_CHECK(d.cuMemHostAlloc(reinterpret_cast<void**>(&h_out[i]), bytes, 0));
    CU_CHECK(d.cuMemAlloc(&d_in[i], bytes));
    CU_CHECK(d.cuMemAlloc(&d_out[i], bytes));
  }
  int wrong = 0;
  auto check = [&](int slot) {  // postprocess the batch that last used this slot
    if (last_batch[slot] < 0) return;
    for (int i = 0; i < batch_size; i += 4099) {
      const float x = float(last_batch[slot]) + i % 100;
      wrong += h_out[slot][i] != x * x + 1.0f;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (int batch = 0; batch < num_batches; ++batch) {
    const int slot = batch % kStages;
    // Before reusing the slot, make sure its previous D2H has completed.
    if (batch >= kStages) CU_CHECK(d.cuEventSynchronize(done[slot]));
    check(slot);
    for (int i = 0; i < batch_size; ++i) h_in[slot][i] = float(batch) + i % 100;
    CU_CHECK(d.cuMemcpyHtoDAsync(d_in[slot], h_in[slot], bytes, streams[slot]));
    int n = batch_size;
    void* args[] = {&d_out[slot], &d_in[slot], &n};
    CU_CHECK(d.cuLaunchKernel(my_kernel, batch_size / 256, 1, 1, 256, 1, 1, 0, streams[slot], args, nullptr));
    CU_CHECK(d.cuMemcpyDtoHAsync(h_out[slot], d_out[slot], bytes, streams[slot]));
    CU_CHECK(d.cuEventRecord(done[slot], streams[slot]));
    last_batch[slot] = batch;
  }
  for (int i = 0; i < kStages; ++i) {
    CU_CHECK(d.cuEventSynchronize(done[i]));
    check(i);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < kStages; ++i) {
    CU_CHECK(d.cuMemFree(d_in[i]));
    CU_CHECK(d.cuMemFree(d_out[i]));
    CU_CHECK(d.cuMemFreeHost(h_in[i]));
    CU_CHECK(d.cuMemFreeHost(h_out[i]));
    CU_CHECK(d.cuEventDestroy(done[i]));
    CU_CHECK(d.cuStreamDestroy(streams[i]));
  }
  CUcontext popped;
  CU_CHECK(d.cuCtxPopCurrent(&popped));
  std::printf("double_buffer_raw: %d batches of %d floats through 2 slots in %.1f ms (%.1f us per batch), %d wrong "
              "values\n", num_batches, batch_size, ms, ms * 1e3 / num_batches, wrong);
  return wrong == 0 ? 0 : 1;
}
