// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The pipeline diagnostics on traces the library's own hooks record (the hand-made timelines are in
// tests/trace/diagnostics_pipeline_test.cpp): a slot pipeline whose preprocess is slower than its GPU work is
// host-bound; kernels each launched after the host waited for the one before idle the GPU through host round trips;
// a pipeline with slots enough to keep the GPU busy shows neither.
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/recorder.hpp>

#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "trace_recording.hpp"

#include <chrono>
#include <string>
#include <thread>

using namespace cuasync;
namespace trace = cuasync::trace;

namespace {

const trace::finding* find(const std::vector<trace::finding>& fs, trace::diagnostic d) {
  for (const trace::finding& f : fs)
    if (f.kind == d) return &f;
  return nullptr;
}

// `batches` batches of 1 MiB through `slots` slots; each preprocess sleeps `pre` (a host stage the GPU waits for),
// the GPU stage a ~100 us kernel. Returns the recorded timeline (after a warm-up batch, dropped).
trace::timeline pipeline_trace(std::size_t slots, std::size_t batches, std::chrono::microseconds pre) {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr std::size_t bytes = 1 << 20;
  runtime::slot_pipeline p(*rt, {.slots = slots, .input_bytes = bytes, .output_bytes = bytes, .post_threads = 2});
  const kernel_ref spin = test::kernels().kernel("sleep_ns");
  auto preprocess = [pre](std::size_t, runtime::pipeline_slot&) { std::this_thread::sleep_for(pre); };
  auto gpu = [&](std::size_t, runtime::pipeline_slot& s) {
    launch(s.stream, spin, {.grid = 1, .block = 1}, std::uint64_t{100'000});
  };
  auto post = [](std::size_t, runtime::pipeline_slot&) {};
  test::trace_recording r;
  p.run(slots, preprocess, gpu, post);  // warm-up: one-time costs of tracing
  (void)trace::snapshot();
  trace::clear();
  p.run(batches, preprocess, gpu, post);
  trace::timeline t = trace::snapshot();
  INFO("no spans were recorded: this build has no tracing hooks in driver/ and runtime/");
  REQUIRE_FALSE(t.spans.empty());
  return t;
}

}  // namespace

TEST_CASE("diagnostics: a slot pipeline whose preprocess is slower than its GPU work is host-bound",
          "[gpu][diagnostics]") {
  // Each batch: a 1 ms preprocess on the driving thread against ~0.25 ms of GPU work.
  const auto findings = trace::diagnose(pipeline_trace(2, 12, std::chrono::microseconds(1000)));
  INFO(trace::to_text(findings));
  const trace::finding* f = find(findings, trace::diagnostic::host_bound_pipeline);
  REQUIRE(f);
  CHECK(f->summary.find("most of it \"preprocess\"") != std::string::npos);
  // One thread preprocesses back to back: it is the limit, and more slots would not help.
  CHECK_FALSE(find(findings, trace::diagnostic::too_few_slots));
  CHECK_FALSE(find(findings, trace::diagnostic::gpu_idle_round_trip));
}

TEST_CASE("diagnostics: a slot pipeline that keeps the GPU busy is not host-bound", "[gpu][diagnostics]") {
  // A preprocess far shorter than the kernel, 4 slots: the GPU always has the next kernel queued.
  const auto findings = trace::diagnose(pipeline_trace(4, 24, std::chrono::microseconds(0)));
  INFO(trace::to_text(findings));
  CHECK_FALSE(find(findings, trace::diagnostic::host_bound_pipeline));
  CHECK_FALSE(find(findings, trace::diagnostic::too_few_slots));
  CHECK_FALSE(find(findings, trace::diagnostic::gpu_idle_round_trip));
}

// [timing]: each gap is the host's wake-up, a look at the result and the launch; compute-sanitizer stretches them.
// The look (20 us of host work) keeps each gap well above the finding's 5 us floor: a GPU span's start is estimated
// from one timing event per operation (the previous span's end, or the issuing call's start on an idle stream), so
// the idle time of the launch's own latency (~5 us) is not in the gap, and a bare synchronize-then-launch shows
// ~3 us gaps on the H200.
TEST_CASE("diagnostics: kernels each launched after the host waited for the one before are round trips",
          "[gpu][diagnostics][timing]") {
  stream s = stream::create(test::ctx());
  const kernel_ref spin = test::kernels().kernel("sleep_ns");
  test::trace_recording r;
  launch(s, spin, {.grid = 1, .block = 1}, std::uint64_t{1'000});  // warm-up
  s.synchronize();
  (void)trace::snapshot();
  trace::clear();
  for (int i = 0; i < 8; ++i) {
    launch(s, spin, {.grid = 1, .block = 1}, std::uint64_t{100'000});
    s.synchronize();  // the host round trip: the next launch could have been enqueued behind this one
    const auto looked = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < looked) {
    }
  }
  const trace::timeline t = trace::snapshot();
  const auto findings = trace::diagnose(t);
  INFO(trace::to_text(findings));
  // The spans themselves, for a failure: each kernel's GPU span should end near its synchronize's end.
  std::string spans;
  for (const trace::span& sp : t.spans)
    spans += sp.name + (sp.clock == trace::clock_source::gpu_events ? " gpu " : " host ") +
             std::to_string(sp.begin_ns - t.spans.front().begin_ns) + " .. " +
             std::to_string(sp.end_ns - t.spans.front().begin_ns) + " ns, stream " + std::to_string(sp.stream_id) +
             ", flow " + std::to_string(sp.flow) + "\n";
  INFO(spans);
  const trace::finding* f = find(findings, trace::diagnostic::gpu_idle_round_trip);
  REQUIRE(f);
  CHECK(f->occurrences >= 3);
  CHECK(f->summary.find("until the host saw the completion") != std::string::npos);
  CHECK_FALSE(find(findings, trace::diagnostic::host_bound_pipeline));
}
