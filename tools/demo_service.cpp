// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The inference service as coroutines (demo_service.hpp), its calibrations, and the figures of a run.
#include "demo_service.hpp"

#include "cli.hpp"
#include "demo_kernels.hpp"
#include "demo_parts.hpp"

#include <cuasync/async_io.hpp>
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/trace/scope.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <thread>

namespace asio = boost::asio;

namespace cuasync::tools::demo {
namespace {

using clock = std::chrono::steady_clock;

double us_since(clock::time_point t0) { return std::chrono::duration<double, std::micro>(clock::now() - t0).count(); }

}  // namespace

void wait_idle(stream_ref s, std::chrono::seconds timeout, const std::string& what) {
  event done = event::create(s.context());
  done.record(s);
  const auto deadline = clock::now() + timeout;
  while (!done.query()) {
    if (clock::now() > deadline) exit_gpu_hung(what + " within " + std::to_string(timeout.count()) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

double gpu_stage_times::bound_us() const noexcept {
  return std::max({kernel_us, copies_together_us > 0 ? copies_together_us : std::max(h2d_us, d2h_us)});
}

double run_result::requests_per_second() const noexcept { return seconds > 0 ? requests / seconds : 0; }

double run_result::us_per_request() const noexcept { return requests ? seconds * 1e6 / requests : 0; }

double run_result::percentile_us(double p) const {
  if (latency_us.empty()) return 0;
  std::vector<double> v = latency_us;
  std::sort(v.begin(), v.end());
  const std::size_t rank = static_cast<std::size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

service::service(runtime::device_runtime& rt, kernel_ref infer, std::size_t request_bytes, std::size_t max_slots,
                 std::size_t threads, std::size_t parts)
    : rt_(rt), infer_(infer), bytes_(request_bytes), threads_(std::max<std::size_t>(threads, 1)),
      parts_(std::max<std::size_t>(parts, 1)), pool_(threads_) {
  slots_.reserve(max_slots);
  for (std::size_t i = 0; i < max_slots; ++i)
    slots_.push_back({pinned_buffer::allocate(rt.context(), bytes_), pinned_buffer::allocate(rt.context(), bytes_),
                      device_buffer::allocate(rt.context(), bytes_), device_buffer::allocate(rt.context(), bytes_),
                      stream::create(rt.context())});
}

service::~service() { pool_.join(); }

// H2D, the kernel and D2H enqueued back to back on the slot's stream: none of them waits on the host (pinned and
// device memory), and stream order makes each wait for the one before on the GPU.
void service::enqueue_gpu(slot& s, std::size_t request) {
  const int n = static_cast<int>(bytes_ / sizeof(float));
  const infer_params p = infer_params::for_request(request, iters_);
  copy_async(s.gpu_stream, s.input_device.span(), std::span<const std::byte>(s.input.bytes()));
  launch(s.gpu_stream, infer_, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256},
         s.output_device.data<float>(), s.input_device.data<const float>(), n, p.bias, p.a, p.b, p.iters);
  copy_async(s.gpu_stream, s.output.bytes(), s.output_device.span());
}

gpu_stage_times service::measure_gpu(std::chrono::seconds timeout) {
  slot& s = slots_.front();
  const int n = static_cast<int>(bytes_ / sizeof(float));
  const launch_config config{.grid = static_cast<unsigned>((n + 255) / 256), .block = 256};
  constexpr int reps = 20;
  auto per_op_us = [&](auto&& enqueue) {
    enqueue();  // warm
    wait_idle(s.gpu_stream, timeout, "the calibration's work");
    const auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) enqueue();
    wait_idle(s.gpu_stream, timeout, "the calibration's work");
    return us_since(t0) / reps;
  };
  gpu_stage_times t;
  t.h2d_us = per_op_us(
      [&] { copy_async(s.gpu_stream, s.input_device.span(), std::span<const std::byte>(s.input.bytes())); });
  t.kernel_us = per_op_us([&] {
    const infer_params p = infer_params::for_request(0, iters_);
    launch(s.gpu_stream, infer_, config, s.output_device.data<float>(), s.input_device.data<const float>(), n,
           p.bias, p.a, p.b, p.iters);
  });
  t.d2h_us = per_op_us([&] { copy_async(s.gpu_stream, s.output.bytes(), s.output_device.span()); });
  if (slots_.size() >= 2) {  // both directions at once, on two slots' streams
    slot& other = slots_[1];
    const auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) {
      copy_async(s.gpu_stream, s.input_device.span(), std::span<const std::byte>(s.input.bytes()));
      copy_async(other.gpu_stream, other.output.bytes(), other.output_device.span());
    }
    wait_idle(s.gpu_stream, timeout, "the calibration's work");
    wait_idle(other.gpu_stream, timeout, "the calibration's work");
    t.copies_together_us = us_since(t0) / reps;
  }
  return t;
}

stage_times service::calibrate(std::chrono::seconds timeout) {
  slot& s = slots_.front();
  const int n = static_cast<int>(bytes_ / sizeof(float));
  fill_input(s.input.as_span<float>(), 0);
  {  // the kernel's steps: about as long as the H2D copy
    iters_ = 1024;
    const gpu_stage_times first = measure_gpu(timeout);
    iters_ = std::clamp(static_cast<int>(iters_ * first.h2d_us / std::max(first.kernel_us, 1.0)), 8, 16384);
  }
  stage_times t;
  t.alone = measure_gpu(timeout);  // its last D2H brought back request 0's response with the final steps
  const std::span<float> input = s.input.as_span<float>().first(n);
  const std::span<const float> output = s.output.as_span<const float>().first(n);
  for (int i = 0; i < 5; ++i) {  // the last of 5: caches and pages warm
    auto t0 = clock::now();
    fill_input(input, 0);
    t.preprocess_us = us_since(t0);
    t0 = clock::now();
    // Kept (and reported): a check whose result is dropped may be optimized away, and its time with it.
    t.calibration_wrong = check_output(output, 0, iters_);
    t.check_us = us_since(t0);
  }
  return t;
}

gpu_stage_times service::calibrate_loaded(std::size_t threads, std::chrono::seconds timeout) {
  // Each load thread preprocesses into a buffer of its own and checks a right response in another, back to back, as
  // the pool does in a pipelined run: the same memory traffic beside the copies. (A wrong response would stop the
  // check at its first value.)
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> ready{0};
  std::atomic<long> sink{0};  // the checks' verdicts, added up: used, so that they are not optimized away
  std::vector<std::thread> load;
  const std::size_t floats = bytes_ / sizeof(float);
  for (std::size_t i = 0; i < threads; ++i)
    load.emplace_back([&, i] {
      std::vector<float> in(floats), out(floats);
      for (std::size_t j = 0; j < floats; ++j) out[j] = static_cast<float>(expected_output(j, i, iters_));
      ready.fetch_add(1);
      long verdicts = 0;
      for (std::size_t request = i; !stop.load(std::memory_order_relaxed); request += threads) {
        fill_input(in, request);
        verdicts += check_output(out, i, iters_);
      }
      sink.fetch_add(verdicts, std::memory_order_relaxed);
    });
  while (ready.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the load running
  gpu_stage_times t;
  try {
    t = measure_gpu(timeout);
  } catch (...) {
    stop = true;
    for (auto& th : load) th.join();
    throw;
  }
  stop = true;
  for (auto& th : load) th.join();
  return t;
}

// What the slot coroutines share. `next` is taken on the pool; the rest is touched on the io thread only.
struct service::run_state {
  std::size_t count = 0, first = 0, done = 0;
  std::atomic<std::size_t> next{0};
  std::vector<double> latency_us;
  double preprocess_us = 0, check_us = 0;
  std::size_t wrong = 0;
  std::string first_wrong;
  std::exception_ptr error;
  std::size_t running = 0;
  std::function<void(std::size_t)> on_progress;
};

// One trip to the pool: what it checked and what it enqueued.
struct service::step {
  static constexpr std::size_t none = SIZE_MAX;
  std::size_t checked = none;  // the index (in the run) of the response checked
  long bad = -1;               // its first wrong value, or -1
  double latency_us = 0, check_us = 0;
  std::size_t next = none;  // the index of the request preprocessed and enqueued
  clock::time_point taken{};
  double preprocess_us = 0;
};

// Checks the slot's last response (its D2H has completed), then takes the next request, preprocesses it and
// enqueues its GPU work, here on the pool: the copy starts as soon as the input is ready. The check reads `output`
// and the preprocess writes `input`, so neither waits for the other's buffer.
service::step service::cpu_step(slot& s, run_state& state, const step& last) {
  const std::size_t floats = bytes_ / sizeof(float), part_floats = (floats + parts_ - 1) / parts_;
  auto part_of = [&](auto whole, std::size_t i) {
    const std::size_t begin = std::min(floats, i * part_floats);
    return whole.subspan(begin, std::min(floats, begin + part_floats) - begin);
  };
  step r;
  if (last.next != step::none) {
    const std::size_t request = state.first + last.next;
    const std::span<const float> output = s.output.as_span<const float>().first(floats);
    std::vector<long> bad(parts_, -1);
    const auto t0 = clock::now();
    run_parts(pool_, parts_, [&](std::size_t i) {
      std::optional<trace::label> l;
      if (trace::enabled()) l.emplace("request " + std::to_string(request));
      const std::span<const float> part = part_of(output, i);
      trace::scope span(trace::category::user, "postprocess", part.size_bytes());
      // Checked as a part of its own: indices from the part's start, the pattern shifted to match.
      const long b = check_part(part, static_cast<std::size_t>(part.data() - output.data()), request, iters_);
      bad[i] = b;
    });
    r.check_us = us_since(t0);
    r.checked = last.next;
    r.latency_us = std::chrono::duration<double, std::micro>(clock::now() - last.taken).count();
    for (long b : bad)
      if (b >= 0) {
        r.bad = b;
        break;
      }
  }
  const std::size_t i = state.next.fetch_add(1, std::memory_order_relaxed);
  if (i >= state.count) return r;
  const std::size_t request = state.first + i;
  r.next = i;
  r.taken = clock::now();
  const std::span<float> input = s.input.as_span<float>().first(floats);
  run_parts(pool_, parts_, [&](std::size_t k) {
    std::optional<trace::label> l;
    if (trace::enabled()) l.emplace("request " + std::to_string(request));
    const std::span<float> part = part_of(input, k);
    trace::scope span(trace::category::user, "preprocess", part.size_bytes());
    fill_part(part, static_cast<std::size_t>(part.data() - input.data()), request);
  });
  r.preprocess_us = us_since(r.taken);
  std::optional<trace::label> l;
  if (trace::enabled()) l.emplace("request " + std::to_string(request));
  const scoped_context current(rt_.context());  // a pool thread: the driver's calls need the context current
  enqueue_gpu(s, request);
  return r;
}

run_result service::run(std::size_t slots, std::size_t requests, std::size_t first_request,
                        std::chrono::seconds timeout, const std::function<void(std::size_t)>& on_progress) {
  slots = std::clamp<std::size_t>(slots, 1, slots_.size());
  auto state = std::make_shared<run_state>();
  state->count = requests;
  state->first = first_request;
  state->latency_us.assign(requests, 0);
  state->on_progress = on_progress;

  // No captures: a coroutine's parameters are copied into its frame, a lambda's captures are not.
  auto worker = [](service* self, std::shared_ptr<run_state> state, slot& s) -> asio::awaitable<void> {
    const auto ex = co_await asio::this_coro::executor;
    step last;
    for (;;) {
      // Named locals in co_await expressions (g++ 12 copies class temporaries bitwise there).
      run_state* st = state.get();
      slot* sl = &s;
      step r = co_await async_run_blocking(
          self->pool_, [self, st, sl, last] { return self->cpu_step(*sl, *st, last); }, asio::use_awaitable);
      if (r.checked != step::none) {
        const std::size_t request = state->first + r.checked;
        state->latency_us[r.checked] = r.latency_us;
        state->check_us += r.check_us;
        if (r.bad >= 0 && state->wrong++ == 0) {
          const auto bad = static_cast<std::size_t>(r.bad);
          state->first_wrong = "request " + std::to_string(request) + ": output[" + std::to_string(bad) + "] is " +
                               std::to_string(s.output.as_span<const float>()[bad]) + ", expected " +
                               std::to_string(expected_output(bad, request, self->iters_));
        }
        if (++state->done % 64 == 0 && state->on_progress) state->on_progress(state->done);
      }
      if (r.next == step::none) break;
      state->preprocess_us += r.preprocess_us;
      stream_ref gpu = s.gpu_stream;
      co_await async_wait(ex, gpu, asio::use_awaitable);
      last = r;
    }
  };

  asio::io_context io(1);
  if (watchdog_) watchdog_->watch(io);
  const auto t0 = clock::now();
  state->running = slots;
  for (std::size_t k = 0; k < slots; ++k)
    asio::co_spawn(io, worker(this, state, slots_[k]), [state](std::exception_ptr e) {
      if (e && !state->error) state->error = e;
      --state->running;
    });
  io.run_for(timeout);
  if (state->running != 0)
    exit_gpu_hung("a run of " + std::to_string(requests) + " requests within " + std::to_string(timeout.count()) +
                  " s");
  run_result r;
  r.seconds = us_since(t0) / 1e6;
  if (state->error) std::rethrow_exception(state->error);
  r.slots = slots;
  r.requests = requests;
  r.latency_us = std::move(state->latency_us);
  r.preprocess_us = state->preprocess_us;
  r.check_us = state->check_us;
  r.wrong = state->wrong;
  r.first_wrong = state->first_wrong;
  return r;
}

}  // namespace cuasync::tools::demo
