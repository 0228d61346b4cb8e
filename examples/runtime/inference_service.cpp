// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The inference service with the runtime: every request does CPU preprocess -> H2D -> GPU kernel -> D2H -> CPU
// postprocess, over 3 slots with pinned host buffers, device buffers, a non-blocking stream and a done event each.
// Postprocessing runs on two worker threads; a slot is refilled only after its postprocess has finished (the
// ownership rule: a host buffer is in use until its copy completes), which the pipeline enforces.
//
// What the pipeline does that inference_service_raw.cpp does not: after each submit it hands to the workers the
// postprocess of every request whose GPU work has finished (an event query per slot), so the workers sum one
// response while this thread fills the next request. The raw version hands a postprocess off only when it comes
// back to that slot to refill it, then waits for that very postprocess: its main thread does both stages in turn.
#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include "../kernels/infer_kernel.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace cuasync;

static const char* source = cuasync::examples::infer_kernel_source;

int main() try {
  constexpr int features = 1 << 18, num_requests = 200;
  auto rt = runtime::device_runtime::for_device(0);
  kernel_ref infer_kernel = rt->kernel(jit::program("inference_service", source), "infer_kernel");
  runtime::slot_pipeline service(
      *rt, {.slots = 3, .input_bytes = features * 4, .output_bytes = features * 4, .post_threads = 2});

  std::vector<double> scores(num_requests, -1);
  std::atomic<int> served{0};
  const auto t0 = std::chrono::steady_clock::now();
  service.run(
      num_requests,
      [&](std::size_t batch, runtime::pipeline_slot& slot) {  // preprocess(slot.h_in, req)
        // In int, as the raw version: a 64-bit % does not vectorize and would make this loop several times slower.
        const int req = static_cast<int>(batch);
        float* in = slot.input.data<float>();
        for (int i = 0; i < features; ++i) in[i] = float((req * 31 + i) % 17);
      },
      [&](std::size_t, runtime::pipeline_slot& slot) {  // infer_kernel<<<grid, block, 0, slot.stream>>>
        launch(slot.stream, infer_kernel, {.grid = features / 256, .block = 256}, slot.output_device.data<float>(),
               slot.input_device.data<const float>(), features);
      },
      [&](std::size_t req, runtime::pipeline_slot& slot) {  // postprocess(slot.h_out), on a worker thread
        const float* out = slot.output.data<float>();
        double sum = 0;
        for (int i = 0; i < features; ++i) sum += out[i];
        scores[req] = sum / features;
        served.fetch_add(1);
      });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int wrong = 0;
  for (double s : scores) wrong += !(s > 1.99 && s < 2.01);
  std::printf("inference_service: %d requests of %d features in %.1f ms over 3 slots (%.0f req/s), %d wrong scores\n",
              served.load(), features, ms, served * 1000.0 / ms, wrong);
  return wrong == 0 && served == num_requests ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "inference_service: %s\n", e.what());
  return 2;
}
