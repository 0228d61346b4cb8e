// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The same inference service as inference_service.cpp, with raw Driver API calls (only the kernel comes from cuasync's
// JIT), for comparison: slots, streams, events, pinned and device buffers by hand, and the postprocess hand-off to
// worker threads with the slot-ownership rule (a slot's host output may not be refilled before its
// postprocess has finished) enforced by hand. Arguments: [features [requests]] (default 262144 200; scripts/gpu-run.sh
// also runs it with the async_io example's sizes, 65536 400).
#include <cuasync/runtime/device_runtime.hpp>

#include "../kernels/infer_kernel.hpp"

#include <chrono>
#include <condition_variable>
#include "../kernels/cu_check.hpp"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

using namespace cuasync;


struct Slot {
  CUstream stream;
  CUevent done;
  float* h_in;
  float* h_out;
  CUdeviceptr d_in, d_out;
  int request = -1;
  bool post_running = false;  // guarded by mutex
};

int main(int argc, char** argv) {
  constexpr int kStages = 3;
  const int features = argc > 1 ? std::atoi(argv[1]) : 1 << 18, num_requests = argc > 2 ? std::atoi(argv[2]) : 200;
  if (features < 256 || features % 256 || num_requests < 1) {
    std::fprintf(stderr, "usage: %s [features (a multiple of 256)] [requests]\n", argv[0]);
    return 2;
  }
  const std::size_t bytes = features * sizeof(float);
  auto rt = runtime::device_runtime::for_device(0);
  CUfunction infer_kernel =
      rt->kernel(jit::program("inference_service_raw", examples::infer_kernel_source), "infer_kernel").get();
  const auto& d = cuasync::detail::driver();
  CU_CHECK(d.cuCtxPushCurrent(rt->context().get()));

  std::vector<Slot> slots(kStages);
  for (auto& slot : slots) {
    CU_CHECK(d.cuStreamCreateWithPriority(&slot.stream, CU_STREAM_NON_BLOCKING, 0));
    CU_CHECK(d.cuEventCreate(&slot.done, CU_EVENT_DISABLE_TIMING));
    CU_CHECK(d.cuMemHostAlloc(reinterpret_cast<void**>(&slot.h_in), bytes, 0));
    CU_CHECK(d.cuMemHostAlloc(reinterpret_cast<void**>(&slot.h_out), bytes, 0));
    CU_CHECK(d.cuMemAlloc(&slot.d_in, bytes));
    CU_CHECK(d.cuMemAlloc(&slot.d_out, bytes));
  }
  // Two postprocess workers.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i)
    workers.emplace_back([&] {
      for (;;) {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (jobs.empty()) return;
        auto job = std::move(jobs.front());
        jobs.pop_front();
        lock.unlock();
        job();
      }
    });
  std::vector<double> scores(num_requests, -1);
  auto retire = [&](Slot& slot) {  // wait for the slot's GPU work, then hand its postprocess to a worker
    if (slot.request < 0) return;
    CU_CHECK(d.cuEventSynchronize(slot.done));
    const int req = slot.request;
    slot.request = -1;
    std::lock_guard lock(mutex);
    slot.post_running = true;
    jobs.push_back([&, req, &slot = slot] {
      double sum = 0;
      for (int i = 0; i < features; ++i) sum += slot.h_out[i];
      scores[req] = sum / features;
      std::lock_guard lock(mutex);
      slot.post_running = false;
      cv.notify_all();
    });
    cv.notify_all();
  };
  auto wait_post = [&](Slot& slot) {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return !slot.post_running; });
  };

  const auto t0 = std::chrono::steady_clock::now();
  for (int req = 0; req < num_requests; ++req) {
    Slot& slot = slots[req % kStages];
    retire(slot);
    wait_post(slot);  // the ownership rule: h_out is not refilled while its postprocess reads it
    for (int i = 0; i < features; ++i) slot.h_in[i] = float((req * 31 + i) % 17);
    CU_CHECK(d.cuMemcpyHtoDAsync(slot.d_in, slot.h_in, bytes, slot.stream));
    int n = features;
    void* args[] = {&slot.d_out, &slot.d_in, &n};
    CU_CHECK(d.cuLaunchKernel(infer_kernel, features / 256, 1, 1, 256, 1, 1, 0, slot.stream, args, nullptr));
    CU_CHECK(d.cuMemcpyDtoHAsync(slot.h_out, slot.d_out, bytes, slot.stream));
    CU_CHECK(d.cuEventRecord(slot.done, slot.stream));
    slot.request = req;
  }
  for (int i = 0; i < num_requests && i < kStages; ++i) retire(slots[(num_requests + i) % kStages]);
  for (auto& slot : slots) wait_post(slot);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  cv.notify_all();
  for (auto& t : workers) t.join();
  for (auto& slot : slots) {
    CU_CHECK(d.cuMemFree(slot.d_in));
    CU_CHECK(d.cuMemFree(slot.d_out));
    CU_CHECK(d.cuMemFreeHost(slot.h_in));
    CU_CHECK(d.cuMemFreeHost(slot.h_out));
    CU_CHECK(d.cuEventDestroy(slot.done));
    CU_CHECK(d.cuStreamDestroy(slot.stream));
  }
  CUcontext popped;
  CU_CHECK(d.cuCtxPopCurrent(&popped));
  int wrong = 0;
  for (double s : scores) wrong += !(s > 1.99 && s < 2.01);
  std::printf("inference_service_raw: %d requests of %d features in %.1f ms over 3 slots (%.0f req/s), %d wrong "
              "scores\n", num_requests, features, ms, num_requests * 1000.0 / ms, wrong);
  return wrong == 0 ? 0 : 1;
}
