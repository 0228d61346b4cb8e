// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The slot pipeline driven from a coroutine (async_run), traced: every batch's stages (preprocess, submit,
// postprocess) are pipeline_stage spans labelled with the batch, its copies carry the label too, and each batch is
// postprocessed only after its download finished on the GPU.
#include <cuasync/async_io.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/trace/recorder.hpp>

#include "gpu.hpp"
#include "trace_recording.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <map>
#include <string>

namespace asio = boost::asio;
using namespace cuasync;

TEST_CASE("async_run records each batch's stages, postprocess after the batch's download", "[async_io][gpu][trace]") {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr int n = 1 << 16, batches = 12;
  runtime::slot_pipeline pipe(*rt, {.slots = 3, .input_bytes = n * sizeof(int), .output_bytes = n * sizeof(int)});
  kernel_ref k = test::kernels().kernel("twice_plus_one");
  asio::io_context io;
  auto done = asio::co_spawn(
      io,
      async_run(
          pipe, batches,
          [&](std::size_t b, runtime::pipeline_slot& s) {
            for (int i = 0; i < n; ++i) s.input.data<int>()[i] = i + int(b);
          },
          [&](std::size_t, runtime::pipeline_slot& s) {
            launch(s.stream, k, {.grid = n / 256, .block = 256}, s.input_device.data<const int>(),
                   s.output_device.data<int>(), n);
          },
          [&](std::size_t, runtime::pipeline_slot&) {}),
      asio::use_future);
  trace::timeline t;
  {
    test::trace_recording rec;
    io.run();
    done.get();
    t = trace::snapshot();
  }

  std::map<std::string, std::map<std::string, int>> stages;  // label -> stage name -> count
  std::map<std::string, std::int64_t> download_end, postprocess_begin;
  for (const trace::span& s : t.spans) {
    if (s.category == trace::category::pipeline_stage) {
      ++stages[s.label][s.name];
      if (s.name == "postprocess") postprocess_begin[s.label] = s.begin_ns;
    }
    if (s.lane.kind == trace::lane_kind::copy_d2h) download_end[s.label] = s.end_ns;
  }
  for (int b = 0; b < batches; ++b) {
    const std::string label = "batch " + std::to_string(b);
    INFO(label);
    CHECK(stages[label] == std::map<std::string, int>{{"preprocess", 1}, {"submit", 1}, {"postprocess", 1}});
    REQUIRE(download_end.count(label) == 1);
    REQUIRE(postprocess_begin.count(label) == 1);
    // The GPU's times are converted to the host clock within microseconds (docs/tracing.md): 50 us of slack.
    CHECK(postprocess_begin[label] >= download_end[label] - 50'000);
  }
}
