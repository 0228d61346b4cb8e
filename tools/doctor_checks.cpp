// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The doctor's measurements (doctor_checks.hpp).
#include "doctor_checks.hpp"

#include "cli.hpp"
#include "demo_service.hpp"

#include <cuasync/async_io.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/trace/recorder.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace asio = boost::asio;

namespace cuasync::tools::doctor {
namespace {

using clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

bandwidth measure_h2d(runtime::device_runtime& rt, std::size_t bytes, int reps, std::chrono::seconds timeout) {
  bandwidth b;
  b.bytes = bytes;
  pinned_buffer pinned = pinned_buffer::allocate(rt.context(), bytes);
  std::vector<std::byte> pageable(bytes, std::byte{1});
  std::memset(pinned.data<void>(), 1, bytes);
  device_buffer device = device_buffer::allocate(rt.context(), bytes);
  stream s = stream::create(rt.context());
  auto gbps = [&](std::span<const std::byte> src) {
    const auto t0 = clock::now();
    copy_async(s, device.span(), src);
    demo::wait_idle(s, timeout, "a copy");
    return bytes / std::chrono::duration<double>(clock::now() - t0).count() / 1e9;
  };
  std::vector<double> pin, page;
  gbps(pinned.bytes());  // warm both paths
  gbps(pageable);
  for (int i = 0; i < reps; ++i) {  // alternating, so that clock ramps and noise hit both alike
    pin.push_back(gbps(pinned.bytes()));
    page.push_back(gbps(pageable));
  }
  b.pinned_gbps = median(pin);
  b.pageable_gbps = median(page);
  return b;
}

await_latency measure_await(runtime::device_runtime& rt, kernel_ref empty, std::size_t samples,
                            std::chrono::seconds timeout) {
  stream s = stream::create(rt.context());
  std::vector<double> us;
  auto loop = [](stream_ref s, kernel_ref k, std::size_t n, std::vector<double>* out) -> asio::awaitable<void> {
    const auto ex = co_await asio::this_coro::executor;
    for (std::size_t i = 0; i < n + 10; ++i) {  // the first 10 warm up
      const auto t0 = clock::now();
      launch(s, k, {.grid = 1, .block = 1});
      co_await async_wait(ex, s, asio::use_awaitable);
      if (i >= 10) out->push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    }
  };
  asio::io_context io(1);
  std::exception_ptr error;
  bool finished = false;
  asio::co_spawn(io, loop(s, empty, samples, &us), [&](std::exception_ptr e) {
    error = e;
    finished = true;
  });
  io.run_for(timeout);
  if (!finished) exit_gpu_hung("an awaited empty kernel within " + std::to_string(timeout.count()) + " s");
  if (error) std::rethrow_exception(error);
  std::sort(us.begin(), us.end());
  await_latency a;
  a.samples = us.size();
  a.p50_us = us.empty() ? 0 : us[us.size() / 2];
  a.p99_us = us.empty() ? 0 : us[std::min(us.size() - 1, us.size() * 99 / 100)];
  return a;
}

pipeline_check traced_pipeline(runtime::device_runtime& rt, kernel_ref infer, std::chrono::seconds timeout) {
  // The demo's service with its defaults, so that the pipeline keeps the GPU busy (the diagnostics stay silent).
  demo::service svc(rt, infer, std::size_t{4} << 20, demo::default_slots, demo::default_threads, demo::default_parts);
  svc.calibrate(timeout);
  svc.run(demo::default_slots, 2 * demo::default_slots, 0, timeout);  // warm
  trace::enable({.output = {}, .max_records = 100'000});
  trace::clear();
  const demo::run_result run = svc.run(demo::default_slots, 120, 2 * demo::default_slots, timeout);
  trace::disable();
  const trace::timeline t = trace::snapshot();
  pipeline_check c;
  c.requests = run.requests;
  c.wrong = run.wrong;
  c.overlap = trace::summarize(t, rt.context().device_ordinal());
  c.spans = t.spans.size();
  c.diagnostics = diagnose_timeline(t);
  return c;
}

}  // namespace cuasync::tools::doctor
