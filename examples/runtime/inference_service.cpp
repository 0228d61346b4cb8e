// The seed's §16 service with the runtime: every request does CPU preprocess -> H2D -> GPU kernel -> D2H -> CPU
// postprocess, over 3 slots with pinned host buffers, device buffers, a non-blocking stream and a done event each.
// Postprocessing runs on two worker threads; a slot is refilled only after its postprocess has finished (the
// ownership rule the seed warns about), which the pipeline enforces.
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
      [&](std::size_t req, runtime::pipeline_slot& slot) {  // preprocess(slot.h_in, req)
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
  std::printf("inference_service: %d requests served in %.1f ms over 3 slots (%.0f req/s), %d wrong scores\n",
              served.load(), ms, served * 1000.0 / ms, wrong);
  return wrong == 0 && served == num_requests ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "inference_service: %s\n", e.what());
  return 2;
}
