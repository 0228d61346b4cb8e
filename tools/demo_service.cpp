// The §16 service as coroutines (demo_service.hpp), its calibration, and the figures of a run.
#include "demo_service.hpp"

#include "cli.hpp"
#include "demo_kernels.hpp"

#include <cuasync/async_io.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/trace/scope.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <stdexcept>
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

double stage_times::bound_us() const noexcept {
  return std::max({kernel_us, copies_together_us > 0 ? copies_together_us : std::max(h2d_us, d2h_us)});
}

double run_result::requests_per_second() const noexcept { return seconds > 0 ? requests / seconds : 0; }

double run_result::percentile_us(double p) const {
  if (latency_us.empty()) return 0;
  std::vector<double> v = latency_us;
  std::sort(v.begin(), v.end());
  const std::size_t rank = static_cast<std::size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

service::service(runtime::device_runtime& rt, kernel_ref infer, std::size_t request_bytes, std::size_t max_slots)
    : rt_(rt), infer_(infer), bytes_(request_bytes) {
  slots_.reserve(max_slots);
  for (std::size_t i = 0; i < max_slots; ++i)
    slots_.push_back({pinned_buffer::allocate(rt.context(), bytes_), pinned_buffer::allocate(rt.context(), bytes_),
                      device_buffer::allocate(rt.context(), bytes_), device_buffer::allocate(rt.context(), bytes_),
                      stream::create(rt.context())});
}

service::~service() = default;

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

stage_times service::calibrate(std::chrono::seconds timeout) {
  slot& s = slots_.front();
  const int n = static_cast<int>(bytes_ / sizeof(float));
  const launch_config config{.grid = static_cast<unsigned>((n + 255) / 256), .block = 256};
  fill_input(s.input.as_span<float>(), 0);
  constexpr int reps = 20;
  auto per_op_us = [&](auto&& enqueue) {
    enqueue();  // warm
    wait_idle(s.gpu_stream, timeout, "the calibration's work");
    const auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) enqueue();
    wait_idle(s.gpu_stream, timeout, "the calibration's work");
    return us_since(t0) / reps;
  };
  auto kernel = [&] {
    const infer_params p = infer_params::for_request(0, iters_);
    launch(s.gpu_stream, infer_, config, s.output_device.data<float>(), s.input_device.data<const float>(), n,
           p.bias, p.a, p.b, p.iters);
  };
  stage_times t;
  t.h2d_us = per_op_us(
      [&] { copy_async(s.gpu_stream, s.input_device.span(), std::span<const std::byte>(s.input.bytes())); });
  iters_ = 1024;
  const double k = per_op_us(kernel);
  iters_ = std::clamp(static_cast<int>(iters_ * t.h2d_us / std::max(k, 1.0)), 8, 16384);
  t.kernel_us = per_op_us(kernel);
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
  const std::span<float> input = s.input.as_span<float>().first(n);
  const std::span<const float> output = s.output.as_span<const float>().first(n);
  for (int i = 0; i < 5; ++i) {  // the last of 5: caches and pages warm, as in the runs
    auto t0 = clock::now();
    fill_input(input, 0);
    t.preprocess_us = us_since(t0);
    t0 = clock::now();
    (void)check_output(output, 0, iters_);
    t.check_us = us_since(t0);
  }
  return t;
}

// What the slot coroutines share; all of it is touched on the io thread only.
struct service::run_state {
  std::size_t count = 0, first = 0, next = 0, done = 0;
  std::vector<double> latency_us;
  std::size_t wrong = 0;
  std::string first_wrong;
  std::exception_ptr error;
  std::size_t running = 0;
  std::function<void(std::size_t)> on_progress;
};

run_result service::run(std::size_t slots, std::size_t requests, std::size_t first_request,
                                       std::chrono::seconds timeout,
                                       const std::function<void(std::size_t)>& on_progress) {
  slots = std::clamp<std::size_t>(slots, 1, slots_.size());
  auto state = std::make_shared<run_state>();
  state->count = requests;
  state->first = first_request;
  state->latency_us.assign(requests, 0);
  state->on_progress = on_progress;
  const std::size_t floats = bytes_ / sizeof(float);
  const int iters = iters_;

  // No captures: a coroutine's parameters are copied into its frame, a lambda's captures are not.
  auto worker = [](service* self, std::shared_ptr<run_state> state, slot& s, std::size_t floats,
                   int iters) -> asio::awaitable<void> {
    const auto ex = co_await asio::this_coro::executor;
    while (state->next < state->count) {
      const std::size_t i = state->next++;
      const std::size_t request = state->first + i;
      const auto taken = clock::now();
      std::span<float> input = s.input.as_span<float>().first(floats);
      co_await async_run_blocking(
          [input, request] {
            std::optional<trace::label> l;
            if (trace::enabled()) l.emplace("request " + std::to_string(request));
            trace::scope span(trace::category::user, "preprocess", input.size_bytes());
            fill_input(input, request);
          },
          asio::use_awaitable);
      {
        std::optional<trace::label> l;
        if (trace::enabled()) l.emplace("request " + std::to_string(request));
        self->enqueue_gpu(s, request);
      }
      stream_ref gpu = s.gpu_stream;
      co_await async_wait(ex, gpu, asio::use_awaitable);
      std::span<const float> output = s.output.as_span<const float>().first(floats);
      const long bad = co_await async_run_blocking(
          [output, request, iters] {
            std::optional<trace::label> l;
            if (trace::enabled()) l.emplace("request " + std::to_string(request));
            trace::scope span(trace::category::user, "postprocess", output.size_bytes());
            return check_output(output, request, iters);
          },
          asio::use_awaitable);
      state->latency_us[i] = us_since(taken);
      if (bad >= 0 && state->wrong++ == 0)
        state->first_wrong = "request " + std::to_string(request) + ": output[" + std::to_string(bad) + "] is " +
                             std::to_string(output[static_cast<std::size_t>(bad)]) + ", expected " +
                             std::to_string(expected_output(static_cast<std::size_t>(bad), request, iters));
      if (++state->done % 64 == 0 && state->on_progress) state->on_progress(state->done);
    }
  };

  asio::io_context io(1);
  if (watchdog_) watchdog_->watch(io);
  const auto t0 = clock::now();
  state->running = slots;
  for (std::size_t k = 0; k < slots; ++k)
    asio::co_spawn(io, worker(this, state, slots_[k], floats, iters), [state](std::exception_ptr e) {
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
  r.wrong = state->wrong;
  r.first_wrong = state->first_wrong;
  return r;
}

}  // namespace cuasync::tools::demo
