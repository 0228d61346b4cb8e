// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/launch.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <thread>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
constexpr int n = 1 << 14;  // ints per batch
}

TEST_CASE("the slot pipeline runs every batch through its slots with the right results", "[runtime][pipeline][gpu]") {
  auto rt = device_runtime::for_device(0);
  const unsigned threads = GENERATE(0u, 2u);
  slot_pipeline p(*rt, {.slots = 3, .input_bytes = n * 4, .output_bytes = n * 4, .post_threads = threads});
  auto k = test::kernels().kernel("twice_plus_one");
  std::vector<long long> sums(40, -1);
  p.run(
      sums.size(),
      [&](std::size_t b, pipeline_slot& s) {
        int* in = s.input.data<int>();
        for (int i = 0; i < n; ++i) in[i] = static_cast<int>(b) * 1000 + i;
      },
      [&](std::size_t, pipeline_slot& s) {
        launch(s.stream, k, {.grid = n / 256, .block = 256}, s.input_device.data<int>(), s.output_device.data<int>(), n);
      },
      [&](std::size_t b, pipeline_slot& s) {
        const int* out = s.output.data<int>();
        long long sum = 0;
        bool ok = true;
        for (int i = 0; i < n; ++i) {
          ok &= out[i] == (static_cast<int>(b) * 1000 + i) * 2 + 1;
          sum += out[i];
        }
        sums[b] = ok ? sum : -2;
      });
  for (std::size_t b = 0; b < sums.size(); ++b) {
    CAPTURE(b);
    REQUIRE(sums[b] >= 0);
  }
}

TEST_CASE("slot reuse never overwrites a host buffer a copy is still reading", "[runtime][pipeline][gpu]") {
  auto rt = device_runtime::for_device(0);
  slot_pipeline p(*rt, {.slots = 2, .input_bytes = n * 4, .output_bytes = n * 4});
  auto k = test::kernels().kernel("twice_plus_one");
  test::gate g;
  std::atomic<bool> opened{false};
  std::atomic<bool> overwritten_early{false};
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    opened = true;
    g.open();
  });
  std::vector<int> first_value(6, -1);
  p.run(
      6,
      [&](std::size_t b, pipeline_slot& s) {
        if (b >= 2 && !opened) overwritten_early = true;  // slot 0 refilled while batch 0's H2D is held
        int* in = s.input.data<int>();
        for (int i = 0; i < n; ++i) in[i] = static_cast<int>(b) * 10 + i;
        if (b == 0) g.close(s.stream);  // batch 0's H2D waits behind the gate
      },
      [&](std::size_t, pipeline_slot& s) {
        launch(s.stream, k, {.grid = n / 256, .block = 256}, s.input_device.data<int>(), s.output_device.data<int>(), n);
      },
      [&](std::size_t b, pipeline_slot& s) { first_value[b] = s.output.data<int>()[0]; });
  opener.join();
  CHECK_FALSE(overwritten_early);
  for (int b = 0; b < 6; ++b) CHECK(first_value[b] == b * 10 * 2 + 1);
}

TEST_CASE("a failing stage stops the pipeline and rethrows after draining", "[runtime][pipeline][gpu]") {
  auto rt = device_runtime::for_device(0);
  slot_pipeline p(*rt, {.slots = 2, .input_bytes = 1024, .output_bytes = 1024, .post_threads = 1});
  int posts = 0;
  CHECK_THROWS_WITH(p.run(
                        10,
                        [](std::size_t b, pipeline_slot& s) {
                          if (b == 4) throw std::runtime_error("bad batch 4");
                          std::memset(s.input.get(), 0, 1024);  // what is copied is written (initcheck)
                        },
                        [](std::size_t, pipeline_slot& s) { memset32_async(s.stream, s.output_device.span(), 0); },
                        [&](std::size_t, pipeline_slot&) { ++posts; }),
                    "bad batch 4");
  CHECK(posts == 4);
  CHECK_THROWS_AS(slot_pipeline(*rt, {.slots = 0, .input_bytes = 1, .output_bytes = 1}), cuda_error);
}

// CTest runtime_pipeline_simulated: the postprocess hand-off on the simulated driver (copies only: its GPU stage
// copies the input to the output on the device).
TEST_CASE("the slot pipeline hands each finished batch to its workers before its slot comes round (simulated)",
          "[runtime][pipeline][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = device_runtime::for_device(0);
  constexpr std::size_t slots = 3, batches = 40;
  slot_pipeline p(*rt, {.slots = slots, .input_bytes = n * 4, .output_bytes = n * 4, .post_threads = 2});
  std::atomic<std::size_t> submitted{0}, wrong{0}, early{0}, posted{0};
  p.run(
      batches,
      [&](std::size_t b, pipeline_slot& s) {
        int* in = s.input.data<int>();
        for (int i = 0; i < n; ++i) in[i] = static_cast<int>(b) * 7 + i;
        std::this_thread::sleep_for(std::chrono::microseconds(300));  // the last batch's copies finish meanwhile
        submitted.fetch_add(1);
      },
      [](std::size_t, pipeline_slot& s) { copy_async(s.stream, s.output_device.span(), s.input_device.span()); },
      [&](std::size_t b, pipeline_slot& s) {
        // Handed off when the slot comes round again, batch b + slots would have been preprocessed by now.
        if (submitted.load() < b + slots) early.fetch_add(1);
        const int* out = s.output.data<int>();
        for (int i = 0; i < n; i += 97)
          if (out[i] != static_cast<int>(b) * 7 + i) {
            wrong.fetch_add(1);
            break;
          }
        posted.fetch_add(1);
      });
  CHECK(posted == batches);
  CHECK(wrong == 0);
  // The last `slots` batches are drained after the loop; most of the others were handed off early.
  CHECK(early >= (batches - slots) / 2);
}
