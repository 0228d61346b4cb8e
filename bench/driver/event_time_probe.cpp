// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Probe (not a benchmark): do timing events map onto the host clock as the GPU span collector assumes? A kernel of
// 100 us is launched, a timing event recorded after it, the stream synchronized; the event's time after a reference
// event (recorded on an idle stream and watched until done) is set beside the host's times of the launch, of the
// record call's return and of the synchronize's return. Then the same loop traced, its spans printed: the GPU span of
// each kernel should end near its synchronize's end, not near its launch.
// Usage: cuasync_event_time_probe
#include <cuasync/driver.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <cstdio>
#include <string>

using namespace cuasync;
namespace b = cuasync::bench;

namespace {
std::int64_t host_ns() { return trace::now_ns(); }
}  // namespace

int main() {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_event_time_probe needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  context_ref ctx = test::ctx();
  scoped_context current(ctx);
  const auto& d = detail::driver();
  stream s = stream::create(ctx), idle = stream::create(ctx);
  const kernel_ref k = test::kernels().kernel("sleep_ns");
  CUevent ref = nullptr, end = nullptr;
  d.cuEventCreate(&ref, CU_EVENT_DEFAULT);
  d.cuEventCreate(&end, CU_EVENT_DEFAULT);
  launch(s, k, {.grid = 1, .block = 1}, std::uint64_t{1'000});
  s.synchronize();
  d.cuEventRecord(ref, idle.get());
  while (d.cuEventQuery(ref) == CUDA_ERROR_NOT_READY) {
  }
  const std::int64_t ref_seen = host_ns();
  std::printf("raw: times in us after the reference was seen done; event = its elapsed time after the reference\n");
  std::printf("  launch call  record returned  synchronize returned  event  event - sync end\n");
  for (int i = 0; i < 8; ++i) {
    const std::int64_t t0 = host_ns();
    launch(s, k, {.grid = 1, .block = 1}, std::uint64_t{100'000});
    d.cuEventRecord(end, s.get());
    const std::int64_t t1 = host_ns();
    s.synchronize();
    const std::int64_t t2 = host_ns();
    float ms = 0;
    d.cuEventElapsedTime(&ms, ref, end);
    const double ev = ms * 1e3;
    std::printf("  %10.1f  %15.1f  %20.1f  %10.1f  %+8.1f\n", (t0 - ref_seen) / 1e3, (t1 - ref_seen) / 1e3,
                (t2 - ref_seen) / 1e3, ev, ev - (t2 - ref_seen) / 1e3);
    const auto looked = b::clock::now() + std::chrono::microseconds(20);
    while (b::clock::now() < looked) {
    }
  }
  // The same loop traced: the recorder's spans.
  trace::enable({.output = {}, .max_records = 100'000});
  launch(s, k, {.grid = 1, .block = 1}, std::uint64_t{1'000});
  s.synchronize();
  (void)trace::snapshot();
  trace::clear();
  for (int i = 0; i < 8; ++i) {
    launch(s, k, {.grid = 1, .block = 1}, std::uint64_t{100'000});
    s.synchronize();
    const auto looked = b::clock::now() + std::chrono::microseconds(20);
    while (b::clock::now() < looked) {
    }
  }
  const trace::timeline t = trace::snapshot();
  trace::disable();
  std::int64_t origin = INT64_MAX;
  for (const trace::span& sp : t.spans) origin = std::min(origin, sp.begin_ns);
  std::printf("traced: spans (us from the first)\n");
  for (const trace::span& sp : t.spans)
    std::printf("  %-28s %-12s %10.1f .. %10.1f (%8.1f)\n", sp.name.c_str(),
                sp.clock == trace::clock_source::gpu_events ? "gpu" : "host", (sp.begin_ns - origin) / 1e3,
                (sp.end_ns - origin) / 1e3, (sp.end_ns - sp.begin_ns) / 1e3);
  d.cuEventDestroy(ref);
  d.cuEventDestroy(end);
  return 0;
}
