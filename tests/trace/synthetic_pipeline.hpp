// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// A synthetic pipeline timeline, the source of the committed test trace (data/pipeline_trace.json, written by
// make_pipeline_trace): six batches round-robin over three streams of GPU 0, each an 8 MiB H2D copy, a 1.5 ms kernel
// and a 4 MiB D2H copy, a batch started every millisecond, so copies overlap kernels and kernels overlap each other;
// an io thread preprocesses (and has one JIT cache hit), another thread postprocesses. And the same pipeline scaled
// to any number of spans, in bursts with idle gaps between them, with the io thread's issue calls linked to the
// work they issued (the source of the timeline test at 100,000 spans).
#include <cuasync/trace/timeline.hpp>

#include <string>

namespace cuasync::trace::test {

inline constexpr std::int64_t pipeline_origin_ns = 1'000'000'000;
inline constexpr int pipeline_streams = 3;
inline constexpr std::uint64_t pipeline_first_stream_id = 11;

inline timeline pipeline_timeline() {
  constexpr std::int64_t us = 1'000;
  timeline t;
  t.origin_ns = pipeline_origin_ns;
  t.devices.push_back({0, "NVIDIA H200", 132, 3});
  const lane h2d = lane::copy(0, lane_kind::copy_h2d), d2h = lane::copy(0, lane_kind::copy_d2h);
  const lane io = lane::host_thread(1), post = lane::host_thread(2);
  t.lanes = {{io, "io thread"}, {post, "postprocess thread"}};
  auto add = [&](lane l, category c, std::string name, std::int64_t begin_us, std::int64_t end_us, std::string label,
                 std::uint64_t bytes = 0, std::uint64_t stream_id = 0) {
    span s;
    s.lane = l;
    s.category = c;
    s.clock = l.kind == lane_kind::host_thread ? clock_source::host : clock_source::gpu_events;
    s.begin_ns = pipeline_origin_ns + begin_us * us;
    s.end_ns = pipeline_origin_ns + end_us * us;
    s.name = std::move(name);
    s.label = std::move(label);
    s.bytes = bytes;
    s.stream_id = stream_id;
    t.spans.push_back(std::move(s));
  };
  add(io, category::jit_cache_hit, "scale_add (disk cache)", 100, 250, "startup");
  for (int b = 0; b < 6; ++b) {
    const std::int64_t start = 1'000 + b * 1'000;
    const std::uint64_t stream = pipeline_first_stream_id + static_cast<std::uint64_t>(b % pipeline_streams);
    const std::string label = "batch " + std::to_string(b);
    add(io, category::pipeline_stage, "preprocess", start - 300, start, label);
    add(h2d, category::copy, "cuMemcpyHtoDAsync", start, start + 600, label, 8u << 20, stream);
    add(lane::stream(0, stream), category::launch, "scale_add", start + 600, start + 2'100, label);
    add(d2h, category::copy, "cuMemcpyDtoHAsync", start + 2'100, start + 2'600, label, 4u << 20, stream);
    add(post, category::pipeline_stage, "postprocess", start + 2'700, start + 2'900, label);
  }
  t.normalize();
  return t;
}

// The scaled pipeline: `bursts` bursts of `batches_per_burst` batches (one started every millisecond, as above), a
// burst every `burst_period_ms`. Per batch 8 spans: preprocess, the three issue calls (host spans on the io thread,
// each linked by span::flow to its GPU span), H2D copy, kernel, D2H copy, postprocess.
inline constexpr int scaled_spans_per_batch = 8;
inline constexpr std::int64_t scaled_burst_period_ms = 400;

inline timeline scaled_pipeline_timeline(int bursts, int batches_per_burst) {
  constexpr std::int64_t us = 1'000;
  timeline t;
  t.origin_ns = pipeline_origin_ns;
  t.pid = 4242;
  t.devices.push_back({0, "NVIDIA H200", 132, 3});
  const lane h2d = lane::copy(0, lane_kind::copy_h2d), d2h = lane::copy(0, lane_kind::copy_d2h);
  const lane io = lane::host_thread(1), post = lane::host_thread(2);
  t.lanes = {{io, "io thread"}, {post, "postprocess thread"}};
  t.spans.reserve(static_cast<std::size_t>(bursts) * static_cast<std::size_t>(batches_per_burst) *
                  scaled_spans_per_batch);
  std::uint64_t flow = 0;
  auto add = [&](lane l, category c, const char* name, std::int64_t begin_us, std::int64_t end_us, std::uint64_t bytes,
                 std::uint64_t stream_id, std::uint64_t flow_id) {
    span s;
    s.lane = l;
    s.category = c;
    s.clock = l.kind == lane_kind::host_thread ? clock_source::host : clock_source::gpu_events;
    s.begin_ns = pipeline_origin_ns + begin_us * us;
    s.end_ns = pipeline_origin_ns + end_us * us;
    s.name = name;
    s.bytes = bytes;
    s.stream_id = stream_id;
    s.flow = flow_id;
    t.spans.push_back(std::move(s));
  };
  for (int burst = 0; burst < bursts; ++burst) {
    for (int b = 0; b < batches_per_burst; ++b) {
      const std::int64_t start = 1'000 + burst * scaled_burst_period_ms * 1'000 + b * 1'000;
      const std::uint64_t stream = pipeline_first_stream_id + static_cast<std::uint64_t>(b % pipeline_streams);
      const std::uint64_t up = ++flow, run = ++flow, down = ++flow;
      add(io, category::pipeline_stage, "preprocess", start - 300, start - 15, 0, 0, 0);
      add(io, category::copy, "cuMemcpyHtoDAsync", start - 15, start - 10, 8u << 20, stream, up);
      add(io, category::launch, "scale_add", start - 10, start - 5, 0, stream, run);
      add(io, category::copy, "cuMemcpyDtoHAsync", start - 5, start, 4u << 20, stream, down);
      add(h2d, category::copy, "cuMemcpyHtoDAsync", start, start + 600, 8u << 20, stream, up);
      add(lane::stream(0, stream), category::launch, "scale_add", start + 600, start + 2'100, 0, 0, run);
      add(d2h, category::copy, "cuMemcpyDtoHAsync", start + 2'100, start + 2'600, 4u << 20, stream, down);
      add(post, category::pipeline_stage, "postprocess", start + 2'700, start + 2'900, 0, 0, 0);
    }
  }
  t.normalize();
  return t;
}

}  // namespace cuasync::trace::test
