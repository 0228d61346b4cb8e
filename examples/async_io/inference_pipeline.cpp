// The seed's §16 inference pipeline written as coroutines: many requests in flight, each one
//   preprocess (CPU) → co_await H2D → co_await kernel → co_await D2H → postprocess (CPU),
// over a few streams, all on ONE io_context thread that never blocks: while a request waits for the GPU, the
// thread preprocesses and postprocesses others. The kernel is compiled at run time with async_compile (NVRTC on a
// thread pool). Each request owns its pinned and device buffers for its lifetime (seed §12.1, §15.4): a request's
// buffers are reused only after its own D2H copy was awaited.
#include <cuasync/async_io.hpp>
#include <cuasync/driver.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "../kernels/infer_kernel.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;

static const char* source = cuasync::examples::infer_kernel_source;

namespace {

constexpr int features = 1 << 16, num_requests = 400, in_flight = 8, num_streams = 3;

struct request_slot {
  pinned_buffer host_in, host_out;
  device_buffer dev_in, dev_out;
};

// One worker: takes requests until none are left, each through preprocess → H2D → kernel → D2H → postprocess.
asio::awaitable<void> worker(stream_ref s, kernel_ref infer, request_slot& slot, int& next_request,
                             std::vector<double>& scores) {
  const launch_config config{.grid = (features + 255) / 256, .block = 256};
  while (next_request < num_requests) {
    const int req = next_request++;  // one io thread: no lock needed
    // Preprocess on the io thread (CPU work between awaits runs while other requests' GPU work proceeds).
    float* in = slot.host_in.data<float>();
    for (int i = 0; i < features; ++i) in[i] = float((req * 31 + i) % 17);
    co_await async_copy(s, slot.dev_in.span(), std::as_bytes(slot.host_in.bytes()));
    co_await async_launch(s, infer, config, slot.dev_out.data<float>(), slot.dev_in.data<float>(), features);
    co_await async_copy(s, slot.host_out.bytes(), slot.dev_out.span());
    // Postprocess: the D2H copy has completed, so the output is safe to read (seed §2, §15.2).
    const float* out = slot.host_out.data<float>();
    double sum = 0;
    for (int i = 0; i < features; ++i) sum += out[i];
    scores[req] = sum / features;
  }
}

asio::awaitable<void> serve(context_ref ctx, int& next_request, std::vector<double>& scores) {
  // Compile without blocking the io thread; named locals, not temporaries, in co_await expressions (g++ 12).
  jit::program program("inference_pipeline", source);
  const jit::compile_options options;
  const int cc = ctx.device().compute_capability();
  jit::compile_result compiled = co_await async_compile(std::move(program), cc, options, asio::use_awaitable);
  module mod = module::load(ctx, compiled->bytes(), "inference_pipeline");
  kernel_ref infer = mod.kernel("infer_kernel");

  std::vector<stream> streams;
  for (int i = 0; i < num_streams; ++i) streams.push_back(stream::create(ctx));
  std::vector<request_slot> slots;
  for (int i = 0; i < in_flight; ++i)
    slots.push_back({pinned_buffer::allocate(ctx, features * 4), pinned_buffer::allocate(ctx, features * 4),
                     device_buffer::allocate(ctx, features * 4), device_buffer::allocate(ctx, features * 4)});

  // `in_flight` workers share `num_streams` streams; waits on one stream complete in order, different streams
  // overlap copies and kernels.
  auto ex = co_await asio::this_coro::executor;
  int running = in_flight;
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  for (int w = 0; w < in_flight; ++w)
    asio::co_spawn(ex, worker(streams[w % num_streams], infer, slots[w], next_request, scores),
                   [&](std::exception_ptr e) {
                     if (e) std::rethrow_exception(e);
                     if (--running == 0) all_done.cancel();
                   });
  boost::system::error_code ec;
  co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));  // the buffers outlive the workers
}

}  // namespace

int main() try {
  primary_context ctx = primary_context::retain(0);
  asio::io_context io;  // one io thread: this one
  std::vector<double> scores(num_requests, -1);
  int next_request = 0;
  const auto t0 = std::chrono::steady_clock::now();
  asio::co_spawn(io, serve(ctx, next_request, scores), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int good = 0;
  for (double s : scores) good += (s > 1.99 && s < 2.01);
  std::printf("%d/%d requests served, correct scores %d, %.1f ms (%.0f requests/s incl. the compile), "
              "%d in flight over %d streams on one io thread\n",
              num_requests, num_requests, good, ms, num_requests / (ms / 1e3), in_flight, num_streams);
  return good == num_requests ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "inference_pipeline: %s\n", e.what());
  return 1;
}
