// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync demo`: the README's first command. JIT-compiles the demo's kernels (cold, then the caches), then on the
// GPU runs the inference service (CPU preprocess -> H2D -> kernel -> D2H -> CPU check, per request) pipelined and
// serially in the same process, alternating, checks every response, measures the bound alone and under the runs'
// host load, and traces one pipelined run: the overlap summary, the diagnostics, trace.json and timeline.html.
// Without a GPU it does the JIT part, says once why there is no GPU, and exits 3.
#include "commands.hpp"
#include "demo_kernels.hpp"
#include "demo_report.hpp"
#include "progress.hpp"

#include <cuasync/async_io/io_watchdog.hpp>
#include <cuasync/driver.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

namespace cuasync::tools {
namespace {

using namespace std::chrono_literals;

struct demo_options {
  int device = 0;
  // The defaults: measured on the H200 (bench/results/h200-demo-defaults.txt, docs/tracing.md "The demo's defaults").
  std::size_t slots = demo::default_slots, threads = demo::default_threads, parts = demo::default_parts;
  std::size_t requests = 3000, rounds = 3, mib = 4;
  std::string out = ".";
  bool no_trace = false;
  bool ptx = false;  // load PTX (the driver JIT-compiles it) instead of a CUBIN
  std::size_t watchdog_ms = 50;  // the io-thread watchdog's threshold around the runs (0: off)
};

// The traced pipelined run: recording on for this run only, then the summary, the diagnostics and the two files.
void traced_run(demo::service& svc, const demo_options& o, std::size_t first_request, demo::results& r) {
  trace::enable({.output = {}, .max_records = 500'000});
  trace::clear();
  trace::name_this_thread("io thread");
  r.traced = svc.run(o.slots, std::max<std::size_t>(o.requests / o.rounds, 1), first_request, 60s);
  trace::disable();
  trace::timeline t = trace::snapshot();
  r.trace_spans = t.spans.size();
  r.trace_dropped = t.dropped;
  r.overlap = trace::summarize(t, o.device);
  r.diagnostics = diagnose_timeline(t);
  std::filesystem::create_directories(o.out);
  r.trace_file = (std::filesystem::path(o.out) / "trace.json").string();
  r.timeline_file = (std::filesystem::path(o.out) / "timeline.html").string();
  trace::write_file(t, r.trace_file);
  trace::write_file(t, r.timeline_file);
}

int run_on_gpu(const invocation& inv, const demo_options& o, progress& prog, demo::results& r) {
  auto rt = runtime::device_runtime::create(o.device);  // its own, destroyed before exit
  const device_properties& p = rt->properties();
  r.device = o.device;
  r.device_name = p.name;
  r.compute_capability = std::to_string(p.compute_capability_major) + "." + std::to_string(p.compute_capability_minor);
  r.copy_engines = p.async_engine_count;
  const auto t0 = std::chrono::steady_clock::now();
  const jit::program program(demo::kernel_program_name, demo::kernel_source);
  kernel_ref infer = rt->kernels().kernel(rt->context(), program, "demo_infer", {},
                                          o.ptx ? jit::output_request::ptx : jit::output_request::automatic);
  r.kernel_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  prog.phase("allocating " + std::to_string(o.slots) + " slots and calibrating the kernel");
  demo::service svc(*rt, infer, o.mib << 20, o.slots, o.threads, o.parts);
  // The io-thread watchdog watches every run's io thread: a clean service never blocks it.
  std::mutex reports_mutex;
  std::optional<io_watchdog> watchdog;
  if (o.watchdog_ms) {
    r.watchdog_threshold = std::chrono::milliseconds(o.watchdog_ms);
    watchdog.emplace(r.watchdog_threshold, [&](const stall_report& report) {
      std::lock_guard lock(reports_mutex);
      r.watchdog_reports.push_back(report.text());
    });
    svc.watch_with(&*watchdog);
  }
  r.stages = svc.calibrate(60s);
  r.kernel_iterations = svc.iterations();
  r.request_bytes = svc.request_bytes();
  r.rounds = o.rounds;
  r.threads = o.threads;
  r.parts = o.parts;
  std::size_t next_id = 0;
  auto serve = [&](std::size_t slots, std::size_t n, const std::string& what) {
    prog.phase(what);
    demo::run_result result = svc.run(slots, n, next_id, 60s, [&](std::size_t done) {
      prog.update(std::to_string(done) + "/" + std::to_string(n));
    });
    next_id += n;
    return result;
  };
  serve(o.slots, 4 * o.slots, "warming up");
  serve(1, 4, "warming up");
  const std::size_t per_round = std::max<std::size_t>(o.requests / o.rounds, 1);
  for (std::size_t round = 1; round <= o.rounds; ++round) {
    const std::string of = " (round " + std::to_string(round) + "/" + std::to_string(o.rounds) + ")";
    r.pipelined.add(serve(o.slots, per_round, "pipelined, " + std::to_string(o.slots) + " slots" + of));
    r.serial.add(serve(1, per_round, "serial, one request at a time" + of));
  }
  // The bound again under the host load of the pipelined runs: as many threads running the CPU stages back to back
  // as the runs kept busy on average (their CPU time per request over their time per request).
  {
    const demo::run_result p = r.pipelined.merged();
    const double busy = p.requests && p.seconds > 0 ? (p.preprocess_us + p.check_us) / (p.seconds * 1e6) : 0;
    r.stages.load_threads = std::clamp<std::size_t>(static_cast<std::size_t>(std::lround(busy)), 1, o.threads);
    prog.phase("the bound under the runs' host load (" + std::to_string(r.stages.load_threads) + " threads)");
    r.stages.loaded = svc.calibrate_loaded(r.stages.load_threads, 60s);
  }
  if (!o.no_trace) {
    prog.phase("traced pipelined run");
    traced_run(svc, o, next_id, r);
  }
  svc.watch_with(nullptr);
  watchdog.reset();  // its thread joined: the reports are all in
  prog.done();
  if (inv.json())
    demo::print_json(r, r.verified() ? 0 : exit_failure, "wrong_result",
                     r.verified() ? "" : "responses failed the check");
  else {
    demo::print_text(r);
    demo::print_headline(r);
  }
  if (!r.verified()) {
    std::fprintf(stderr, "cuasync demo: WRONG RESPONSES: the GPU's results failed the check\n");
    return exit_failure;
  }
  return exit_ok;
}

int run(invocation& inv, demo_options o) {
  o.requests = std::max(o.requests, o.rounds);

  progress prog("cuasync demo");
  demo::results r;
  try {
    r.no_gpu = why_no_gpu(o.device);
    std::optional<int> cc;
    if (r.no_gpu.empty()) cc = device::get(o.device).compute_capability();
    prog.phase("JIT-compiling the demo's kernels");
    r.jit = demo::measure_jit(cc);
    prog.done();
    if (!r.no_gpu.empty()) {  // the reason once, on standard error, after the JIT part's figures
      const std::string message = "no usable GPU: " + r.no_gpu;
      if (inv.json())
        demo::print_json(r, exit_no_gpu, "no_gpu", message);
      else
        demo::print_text(r);
      std::fprintf(stderr, "cuasync demo: %s. The JIT part%s ran without one; the service needs a GPU\n",
                   message.c_str(), inv.json() ? "" : " above");
      return exit_no_gpu;
    }
    return run_on_gpu(inv, o, prog, r);
  } catch (const cuda_error& e) {
    prog.done();
    return inv.fail(e);
  } catch (const std::exception& e) {
    prog.done();
    return inv.fail(exit_failure, "error", e.what());  // not a cuda_error: no call site in it
  }
}

runner declare(option_set& opts) {
  auto o = std::make_shared<demo_options>();
  opts.number("--device", o->device, 0, 1024, "N", "the GPU (default 0)", "a device ordinal (0, 1, ...)");
  opts.number("--slots", o->slots, 1, 32, "N",
              "requests in flight in the pipelined runs (default " + std::to_string(demo::default_slots) + ")");
  opts.number("--threads", o->threads, 1, 256, "N",
              "threads that run the CPU stages (default " + std::to_string(demo::default_threads) + ")");
  opts.number("--parts", o->parts, 1, 64, "N",
              "split each request's preprocess and check into N parts run at once on those threads (default " +
                  std::to_string(demo::default_parts) + ")");
  opts.number("--requests", o->requests, 1, 1'000'000, "N", "requests per variant, over all rounds (default 3000)");
  opts.number("--rounds", o->rounds, 1, 100, "N", "pipelined/serial rounds, alternating (default 3)");
  opts.number("--mib", o->mib, 1, 256, "N", "MiB per request each way (default 4)");
  opts.text("-o,--out", o->out, "DIR", "where trace.json and timeline.html go (default: the current directory)");
  opts.flag("--no-trace", o->no_trace, "skip the traced run");
  opts.number("--watchdog", o->watchdog_ms, 0, 60'000, "MS",
              "report io-thread stalls over MS ms during the runs (default 50; 0: off)", "a threshold in ms (0: off)");
  opts.flag("--ptx", o->ptx, "load the kernels as PTX, compiled by the driver (default: a CUBIN for the GPU)");
  return [o](invocation& inv) { return run(inv, *o); };
}

}  // namespace

const command demo_command{
    .name = "demo",
    .summary = "the inference service on the GPU: pipelined vs serial, overlap, diagnostics, a timeline",
    .description =
        "An inference service as coroutines on the runtime: each request is a CPU preprocess, an H2D copy from pinned "
        "memory, a JIT-compiled kernel calibrated to take as long as the copy, a D2H copy and a CPU check of the "
        "response. First the kernels are compiled with NVRTC with no cache, then from the memory and disk caches, "
        "timed. Then the service runs with N slots in flight and serially (one request at a time, same kernels and "
        "sizes), alternating round by round, and prints requests/s and latency p50/p99 of both. Last, one pipelined "
        "run is traced: the overlap summary (H2D, compute, D2H), the diagnostics, DIR/trace.json and "
        "DIR/timeline.html. The bound per request (the GPU stages overlapped perfectly) is measured with the host idle "
        "and again while as many threads run the CPU stages as the pipelined runs kept busy (host memory is shared "
        "with the copies); the last line says what the run shows against both. The CPU stages run on a pool of "
        "--threads threads, one trip there per request, the GPU work enqueued by the thread that preprocessed it. "
        "A wrong response fails the command (status 1).\n\n"
        "Without a GPU the JIT part still runs, for the oldest architecture NVRTC supports (there is no GPU to match), "
        "then it says \"no usable GPU: <reason>\" once, on standard error, and exits 3.",
    .declare = declare,
    .notes = "A progress line goes to standard error (CUASYNC_PROGRESS=0: none).",
};

}  // namespace cuasync::tools
