// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The double buffer (copies of one chunk overlapping the kernel of another) with the runtime: two slots, each with its
// own stream, pinned host buffers, device buffers and done event; a slot is reused only after its previous D2H has
// completed. The raw version creates, records, synchronises and frees all of that by hand; here the pipeline owns it.
//
// The check of each batch (a sample of its output) runs on this thread as the slot comes round again, as in the raw
// version (post_threads = 0): it reads 256 values, so a worker thread would only add a hand-off and a wake-up per
// batch before the slot can be refilled (measured on the H200: 1,006-1,214 us per batch with one worker against
// 966-1,212 us raw).
#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include "../kernels/double_buffer_kernel.hpp"

#include <chrono>
#include <cstdio>

using namespace cuasync;

static const char* source = cuasync::examples::double_buffer_kernel_source;

int main() try {
  constexpr int batch_size = 1 << 20, num_batches = 128;
  auto rt = runtime::device_runtime::for_device(0);
  kernel_ref my_kernel = rt->kernel(jit::program("double_buffer", source), "my_kernel");
  runtime::slot_pipeline pipeline(
      *rt, {.slots = 2, .input_bytes = batch_size * 4, .output_bytes = batch_size * 4, .post_threads = 0});

  int wrong = 0;  // written by the check, on this thread
  const auto t0 = std::chrono::steady_clock::now();
  pipeline.run(
      num_batches,
      [&](std::size_t batch, runtime::pipeline_slot& slot) {  // h_in[batch]
        float* in = slot.input.data<float>();
        const float b = float(batch);
        for (int i = 0; i < batch_size; ++i) in[i] = b + i % 100;
      },
      [&](std::size_t, runtime::pipeline_slot& slot) {
        launch(slot.stream, my_kernel, {.grid = batch_size / 256, .block = 256}, slot.output_device.data<float>(),
               slot.input_device.data<const float>(), batch_size);
      },
      [&](std::size_t batch, runtime::pipeline_slot& slot) {  // h_out[batch]
        const float* out = slot.output.data<float>();
        for (int i = 0; i < batch_size; i += 4099) {
          const float x = float(batch) + i % 100;
          wrong += out[i] != x * x + 1.0f;
        }
      });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("double_buffer: %d batches of %d floats through 2 slots in %.1f ms (%.1f us per batch), %d wrong "
              "values\n", num_batches, batch_size, ms, ms * 1e3 / num_batches, wrong);
  return wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "double_buffer: %s\n", e.what());
  return 2;
}
