// `cuasync demo`: the README's first command. JIT-compiles the demo's kernels (cold, then the caches), then on the
// GPU runs the §16 service pipelined and serially in the same process, alternating, checks every response, and
// traces one pipelined run: the overlap summary, the diagnostics, trace.json and timeline.html. Without a GPU it
// does the JIT part, says why there is no GPU, and exits 3.
#include "commands.hpp"
#include "demo_kernels.hpp"
#include "demo_report.hpp"
#include "progress.hpp"

#include <cuasync/async_io/io_watchdog.hpp>
#include <cuasync/driver.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/trace.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

namespace cuasync::tools {
namespace {

using namespace std::chrono_literals;

struct demo_options {
  int device = 0;
  std::size_t slots = 3, requests = 3000, rounds = 3, mib = 4;
  std::string out = ".";
  bool trace = true;
  bool ptx = false;  // load PTX (the driver JIT-compiles it) instead of a CUBIN
  std::size_t watchdog_ms = 50;  // the io-thread watchdog's threshold around the runs (0: off)
};

bool parse_count(const std::string& s, std::size_t& out, std::size_t lo, std::size_t hi) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size() && out >= lo && out <= hi;
}

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
  demo::service svc(*rt, infer, o.mib << 20, o.slots);
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
  if (o.trace) {
    prog.phase("traced pipelined run");
    traced_run(svc, o, next_id, r);
  }
  svc.watch_with(nullptr);
  watchdog.reset();  // its thread joined: the reports are all in
  prog.done();
  if (inv.json())
    demo::print_json(r, r.verified() ? 0 : exit_failure, "wrong_result",
                     r.verified() ? "" : "responses failed the check");
  else
    demo::print_text(r);
  if (!r.verified()) {
    std::fprintf(stderr, "cuasync demo: WRONG RESPONSES: the GPU's results failed the check\n");
    return exit_failure;
  }
  return exit_ok;
}

int run(invocation& inv) {
  demo_options o;
  argument_walker args(inv.args());
  while (!args.done()) {
    const std::string a = args.next();
    std::string v;
    auto count = [&](std::size_t& out, std::size_t lo, std::size_t hi) {
      return args.value(v) && parse_count(v, out, lo, hi);
    };
    std::size_t device = 0;
    if (a == "--device") {
      if (!count(device, 0, 1024)) return inv.usage_error("--device needs a device ordinal (0, 1, ...)");
      o.device = static_cast<int>(device);
    } else if (a == "--slots") {
      if (!count(o.slots, 1, 16)) return inv.usage_error("--slots needs a number from 1 to 16");
    } else if (a == "--requests") {
      if (!count(o.requests, 1, 1'000'000)) return inv.usage_error("--requests needs a number from 1 to 1000000");
    } else if (a == "--rounds") {
      if (!count(o.rounds, 1, 100)) return inv.usage_error("--rounds needs a number from 1 to 100");
    } else if (a == "--mib") {
      if (!count(o.mib, 1, 256)) return inv.usage_error("--mib needs a number from 1 to 256");
    } else if (a == "--out" || a == "-o") {
      if (!args.value(o.out)) return inv.usage_error(a + " needs a directory");
    } else if (a == "--ptx") {
      o.ptx = true;
    } else if (a == "--watchdog") {
      if (!count(o.watchdog_ms, 0, 60'000)) return inv.usage_error("--watchdog needs a threshold in ms (0: off)");
    } else if (a == "--no-trace") {
      o.trace = false;
    } else {
      return inv.usage_error("unknown option '" + a + "'");
    }
  }
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
    if (!r.no_gpu.empty()) {
      const std::string message = "no GPU: " + r.no_gpu;
      if (inv.json())
        demo::print_json(r, exit_no_gpu, "no_gpu", message);
      else
        demo::print_text(r);
      std::fprintf(stderr, "cuasync demo: %s (the JIT part ran; exit status 3)\n", message.c_str());
      return exit_no_gpu;
    }
    return run_on_gpu(inv, o, prog, r);
  } catch (const cuda_error& e) {
    prog.done();
    return inv.fail(e);
  } catch (const std::exception& e) {
    prog.done();
    return inv.fail(exit_failure, "error", e.what());
  }
}

}  // namespace

const command demo_command{
    "demo", "the §16 inference service on the GPU: pipelined vs serial, overlap, diagnostics, a timeline",
    "usage: cuasync demo [--device N] [--slots N] [--requests N] [--rounds N] [--mib N] [--out DIR] [--no-trace]\n"
    "                    [--watchdog MS] [--ptx]\n"
    "The seed's §16 service as coroutines on the runtime: each request is a CPU preprocess, an H2D copy from pinned\n"
    "memory, a JIT-compiled kernel calibrated to take as long as the copy, a D2H copy and a CPU check of the\n"
    "response. First the kernels are compiled with NVRTC with no cache, then from the memory and disk caches, timed.\n"
    "Then the service runs with N slots in flight and serially (one request at a time, same kernels and sizes),\n"
    "alternating round by round, and prints requests/s and latency p50/p99 of both. Last, one pipelined run is\n"
    "traced: the overlap summary (H2D, compute, D2H), the diagnostics, DIR/trace.json and DIR/timeline.html.\n"
    "A wrong response fails the command (status 1). Without a GPU the JIT part still runs, then it says\n"
    "\"no GPU: <reason>\" and exits 3.\n"
    "  --device N     the GPU (default 0)\n"
    "  --slots N      requests in flight in the pipelined runs (default 3)\n"
    "  --requests N   requests per variant, over all rounds (default 3000)\n"
    "  --rounds N     pipelined/serial rounds, alternating (default 3)\n"
    "  --mib N        MiB per request each way (default 4)\n"
    "  -o, --out DIR  where trace.json and timeline.html go (default: the current directory)\n"
    "  --no-trace     skip the traced run\n"
    "  --watchdog MS  report io-thread stalls over MS ms during the runs (default 50; 0: off)\n"
    "  --ptx          load the kernels as PTX, compiled by the driver (default: a CUBIN for the GPU)\n"
    "A progress line goes to standard error (CUASYNC_PROGRESS=0: none).\n",
    run};

}  // namespace cuasync::tools
