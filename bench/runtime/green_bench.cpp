// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/runtime/green: what green contexts buy a latency-critical loop beside a saturating one. The latency loop
// launches one 256-thread block per SM of a quarter of the device (each thread spinning 20 us on %globaltimer) and
// waits for it, again and again; the saturating loop keeps two 1,024-thread blocks on every SM it may use, 400 us
// each, with always one launch queued behind the running one. Measured alone and beside each other:
//   green  the two loops in two green contexts that split the SMs 1/4 : 3/4 (green_context::split);
//   plain  both on the device's own context, on two streams (the saturating loop then covers every SM).
// Rounds alternate the four variants (green alone, green under load, plain alone, plain under load).
// Usage: cuasync_green_bench [output folder]   (writes green.json and green.md)
#include <cuasync/driver.hpp>
#include <cuasync/driver/green_context.hpp>

#include "bench.hpp"
#include "gpu.hpp"

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;
namespace b = cuasync::bench;

namespace {

constexpr unsigned long long latency_ns = 20'000, saturating_ns = 400'000;

// Keeps `k` (sleep_ns) running on `s` over `grid` blocks of 1,024 threads until stop(): each launch waits for the one
// before the previous, so one is always queued behind the running one.
class saturating_loop {
 public:
  saturating_loop(context_ref ctx, kernel_ref k, unsigned grid)
      : s_(stream::create(ctx)), k_(k), grid_(grid), done_{event::create(ctx), event::create(ctx)} {}
  void start() {
    stop_ = false;
    thread_ = std::thread([this] {
      for (std::uint64_t i = 0; !stop_.load(std::memory_order_relaxed); ++i) {
        launch(s_, k_, {.grid = grid_, .block = 1024}, saturating_ns);
        done_[i % 2].record(s_);
        if (i > 0) done_[(i - 1) % 2].synchronize();
      }
      s_.synchronize();
    });
    // The first blocks are resident before a latency sample starts.
    std::this_thread::sleep_for(std::chrono::microseconds(2 * saturating_ns / 1000));
  }
  void stop() {
    stop_ = true;
    thread_.join();
  }

 private:
  stream s_;
  kernel_ref k_;
  unsigned grid_;
  event done_[2];
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// `n` samples of the latency loop: launch, then wait for it (microseconds each).
std::vector<double> latency_samples(stream_ref s, kernel_ref k, unsigned grid, int n) {
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto t0 = b::clock::now();
    launch(s, k, {.grid = grid, .block = 256}, latency_ns);
    s.synchronize();
    us.push_back(b::us_since(t0));
  }
  return us;
}

void append(std::vector<double>& to, const std::vector<double>& v) { to.insert(to.end(), v.begin(), v.end()); }

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!test::gpu_available(&reason)) {
    std::fprintf(stderr, "cuasync_green_bench needs a GPU: %s\n", reason.c_str());
    return 2;
  }
  const std::string out = b::output_dir(argc, argv);
  const device dev = device::get(0);
  const auto& props = dev.properties();
  b::report rep("green");
  rep.note("device", props.name);
  rep.note("driver", driver_version_string());
  if (!green_context::supported()) {
    rep.note("green contexts", "not supported by this driver: nothing measured");
    rep.write(out);
    return 0;
  }
  const unsigned total = static_cast<unsigned>(props.multiprocessor_count);
  auto [small, large] = green_context::split(dev, total / 4);
  rep.note("split", std::to_string(small.sm_count()) + " + " + std::to_string(large.sm_count()) + " of " +
                        std::to_string(total) + " SMs");
  rep.note("latency loop", "one 256-thread block per SM of the small side (" + std::to_string(small.sm_count()) +
                               "), 20 us each, launched then waited for");
  rep.note("saturating loop", "two 1,024-thread blocks per SM it may use, 400 us each, one always queued");

  // Green: each loop in its own green context, with the kernels loaded there (modules of this scope: unloaded before
  // their green contexts are destroyed, unlike the test support's modules, kept for the process).
  const module small_m = module::load(small.context(), test::kernels_fatbin(), "test_kernels.fatbin");
  const module large_m = module::load(large.context(), test::kernels_fatbin(), "test_kernels.fatbin");
  const kernel_ref green_latency_k = small_m.kernel("sleep_ns");
  const kernel_ref green_saturating_k = large_m.kernel("sleep_ns");
  stream green_s = stream::create(small.context());
  saturating_loop green_load(large.context(), green_saturating_k, 2 * large.sm_count());
  // Plain: both on the primary context; the saturating loop over every SM.
  const kernel_ref plain_k = test::kernels().kernel("sleep_ns");
  stream plain_s = stream::create(test::ctx());
  saturating_loop plain_load(test::ctx(), plain_k, 2 * total);

  const unsigned grid = small.sm_count();
  (void)latency_samples(green_s, green_latency_k, grid, 50);  // warm-up
  (void)latency_samples(plain_s, plain_k, grid, 50);
  constexpr int rounds = 10, per_round = 200;
  std::vector<double> green_alone, green_loaded, plain_alone, plain_loaded;
  for (int r = 0; r < rounds; ++r) {
    append(green_alone, latency_samples(green_s, green_latency_k, grid, per_round));
    green_load.start();
    append(green_loaded, latency_samples(green_s, green_latency_k, grid, per_round));
    green_load.stop();
    append(plain_alone, latency_samples(plain_s, plain_k, grid, per_round));
    plain_load.start();
    append(plain_loaded, latency_samples(plain_s, plain_k, grid, per_round));
    plain_load.stop();
  }
  rep.add({.name = "latency loop in a green context of 1/4 of the SMs: beside a saturating loop in the other 3/4 / "
                   "alone",
           .unit = "us",
           .ours = b::summarize(green_loaded),
           .baseline = b::summarize(green_alone),
           .baseline_name = "the same loop alone",
           .target = "<= 1.2"});
  rep.add({.name = "latency loop on the device's own context: beside a saturating loop on every SM / alone",
           .unit = "us",
           .ours = b::summarize(plain_loaded),
           .baseline = b::summarize(plain_alone),
           .baseline_name = "the same loop alone",
           .target = ">= 2"});
  rep.write(out);
  return 0;
}
