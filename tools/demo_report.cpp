// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync demo`'s output (demo_report.hpp): the JIT part, then the service's figures, the overlap and diagnostics.
#include "demo_report.hpp"

#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <utility>

namespace cuasync::tools::demo {
namespace {

double per_request_us(std::int64_t ns, std::size_t requests) { return requests ? ns / 1e3 / requests : 0; }

void print_jit_text(const jit_report& j) {
  std::printf("JIT (NVRTC, the demo's kernels)\n");
  if (!j.nvrtc_error.empty()) {
    std::printf("  NVRTC did not load: %s\n", j.nvrtc_error.c_str());
    return;
  }
  std::printf("  %-22s %s (%s)%s\n", "NVRTC", j.nvrtc_version.c_str(), j.nvrtc_library.c_str(),
              j.nvrtc_load_ms > 0 ? (", loaded in " + std::to_string(j.nvrtc_load_ms).substr(0, 5) + " ms").c_str()
                                  : "");
  std::printf("  %-22s %s (%s), %zu bytes\n", "target", j.target.c_str(), j.target_reason.c_str(), j.image_bytes);
  std::printf("  %-22s %9.3f ms\n", "cold compile (NVRTC)", j.cold_ms);
  std::printf("  %-22s %9.3f ms   (%.0fx faster)\n", "memory cache hit", j.memory_hit_us / 1e3,
              j.memory_hit_us > 0 ? j.cold_ms * 1e3 / j.memory_hit_us : 0);
  if (j.cache_directory.empty()) {
    std::printf("  %-22s %s\n", "disk cache", j.cache_note.c_str());
    return;
  }
  std::printf("  %-22s %9.3f ms   (%s, %s)\n", "disk cache, 1st lookup", j.disk_first_ms,
              j.disk_first_outcome.c_str(), j.cache_directory.c_str());
  std::printf("  %-22s %9.3f ms   (%.0fx faster than the cold compile)%s%s\n", "disk cache hit", j.disk_hit_ms,
              j.disk_hit_ms > 0 ? j.cold_ms / j.disk_hit_ms : 0, j.cache_note.empty() ? "" : "; ",
              j.cache_note.c_str());
}

void print_variant_text(const char* name, const variant& v) {
  const run_result r = v.merged();
  std::printf("  %-10s %2zu slot%s %9.0f requests/s   latency p50 %8.1f us   p99 %8.1f us   %zu requests%s\n", name,
              v.slots, v.slots == 1 ? " " : "s", r.requests_per_second(), r.percentile_us(0.5),
              r.percentile_us(0.99), v.requests, v.wrong ? "   WRONG RESPONSES" : "");
}

void variant_json(trace::json::writer& w, const char* key, const run_result& r) {
  w.key(key).begin_object().member("slots", static_cast<std::uint64_t>(r.slots));
  w.member("requests", static_cast<std::uint64_t>(r.requests)).member("seconds", r.seconds);
  w.member("requests_per_second", r.requests_per_second());
  w.member("latency_p50_us", r.percentile_us(0.5)).member("latency_p99_us", r.percentile_us(0.99));
  w.member("preprocess_us_per_request", r.requests ? r.preprocess_us / r.requests : 0.0);
  w.member("check_us_per_request", r.requests ? r.check_us / r.requests : 0.0);
  w.member("wrong", static_cast<std::uint64_t>(r.wrong)).end_object();
}

}  // namespace

void variant::add(run_result r) {
  slots = r.slots;
  requests += r.requests;
  seconds += r.seconds;
  preprocess_us += r.preprocess_us;
  check_us += r.check_us;
  if (r.wrong && !wrong) first_wrong = r.first_wrong;
  wrong += r.wrong;
  latency_us.insert(latency_us.end(), r.latency_us.begin(), r.latency_us.end());
}

run_result variant::merged() const {
  run_result r;
  r.slots = slots;
  r.requests = requests;
  r.seconds = seconds;
  r.latency_us = latency_us;
  r.preprocess_us = preprocess_us;
  r.check_us = check_us;
  r.wrong = wrong;
  r.first_wrong = first_wrong;
  return r;
}

double results::wall_over_bound() const {
  const double bound = stages.bound_us();
  return traced && bound > 0 && traced->requests ? traced->seconds * 1e6 / traced->requests / bound : 0;
}

double results::window_over_critical() const {
  const std::int64_t critical = overlap.critical == trace::stage::none ? 0 : overlap.time_of(overlap.critical).busy_ns;
  return critical > 0 ? static_cast<double>(overlap.window_ns()) / critical : 0;
}

double results::over_bound() const {
  const double b = stages.bound_us();
  return b > 0 ? pipelined.merged().us_per_request() / b : 0;
}

double results::over_loaded_bound() const {
  const double b = stages.loaded_bound_us();
  return b > 0 ? pipelined.merged().us_per_request() / b : 0;
}

std::string results::headline() const {
  const run_result p = pipelined.merged();
  const double serial_rps = serial.merged().requests_per_second();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "pipelined %.0f requests/s = %.2fx serial; %.1f us per request = %.2fx the bound under load "
                "(%.1f us), %.2fx the bound alone (%.1f us); overlap factor %s",
                p.requests_per_second(), serial_rps > 0 ? p.requests_per_second() / serial_rps : 0,
                p.us_per_request(), over_loaded_bound(), stages.loaded_bound_us(), over_bound(), stages.bound_us(),
                traced && overlap.critical != trace::stage::none
                    ? (std::to_string(overlap.overlap_factor()).substr(0, 4) + " (traced run)").c_str()
                    : "n/a (no traced run)");
  std::string out = buf;
  const double r = over_loaded_bound();
  if (r > 0 && r <= 1.3) out += ": at the GPU's bound";
  else if (r > 0) out += ": short of the GPU's bound, see the diagnostics";
  return out;
}

double results::window_over_wall() const {
  return traced && traced->seconds > 0 && overlap.critical != trace::stage::none
             ? overlap.window_ns() / (traced->seconds * 1e9)
             : 0;
}

void print_text(const results& r) {
  std::printf("cuasync demo: an inference service as coroutines on the runtime\n"
              "  (per request: CPU preprocess -> H2D copy -> kernel -> D2H copy -> CPU check)\n\n");
  print_jit_text(r.jit);
  if (!r.no_gpu.empty()) return;  // the command says why, once, on standard error
  std::printf("\nGPU %d: %s (compute capability %s, %d copy engines)\n", r.device, r.device_name.c_str(),
              r.compute_capability.c_str(), r.copy_engines);
  std::printf("  kernels from the runtime's kernel cache in %.3f ms (compile or cache hit, and the module load)\n",
              r.kernel_load_ms);
  std::printf("  each request: preprocess (CPU) -> H2D %zu MiB -> kernel (%d steps) -> D2H %zu MiB -> check (CPU)\n",
              r.request_bytes >> 20, r.kernel_iterations, r.request_bytes >> 20);
  const gpu_stage_times& a = r.stages.alone;
  const gpu_stage_times& l = r.stages.loaded;
  std::printf("  each stage alone: H2D %.1f us, kernel %.1f us, D2H %.1f us (H2D and D2H at once: %.1f us);\n"
              "  on the CPU, one thread, data in cache: preprocess %.1f us, check %.1f us\n"
              "  bound per request (the GPU stages overlapped perfectly): %.1f us alone, %.1f us under the runs' host "
              "load\n  (%zu thread%s preprocessing and checking: H2D %.1f us, kernel %.1f us, D2H %.1f us, at once "
              "%.1f us)\n\n",
              a.h2d_us, a.kernel_us, a.d2h_us, a.copies_together_us, r.stages.preprocess_us, r.stages.check_us,
              a.bound_us(), l.bound_us(), r.stages.load_threads, r.stages.load_threads == 1 ? "" : "s", l.h2d_us,
              l.kernel_us, l.d2h_us, l.copies_together_us);
  std::printf("service (%zu rounds, pipelined and serial alternating; CPU stages on %zu threads, %zu part%s each)\n",
              r.rounds, r.threads, r.parts, r.parts == 1 ? "" : "s");
  print_variant_text("pipelined", r.pipelined);
  print_variant_text("serial", r.serial);
  for (const auto& [name, v] : {std::pair{"pipelined", &r.pipelined}, std::pair{"serial", &r.serial}}) {
    const run_result m = v->merged();
    if (m.requests)
      std::printf("  %-10s CPU stages as they ran: preprocess %.1f us, check %.1f us per request\n", name,
                  m.preprocess_us / m.requests, m.check_us / m.requests);
  }
  const double serial_rps = r.serial.merged().requests_per_second();
  std::printf("  pipelined / serial: %.2fx the requests per second\n",
              serial_rps > 0 ? r.pipelined.merged().requests_per_second() / serial_rps : 0);
  std::printf("  responses checked: %s\n", r.verified() ? "all correct" : "WRONG RESPONSES");
  if (!r.verified()) {
    std::printf("  first wrong: %s\n",
                (r.pipelined.wrong ? r.pipelined.first_wrong
                 : r.serial.wrong  ? r.serial.first_wrong
                 : r.traced && r.traced->wrong
                     ? r.traced->first_wrong
                     : "the calibration's response (request 0) at output[" +
                           std::to_string(r.stages.calibration_wrong) + "]").c_str());
  }
  if (r.watchdog_threshold.count()) {
    std::printf("\nio-thread watchdog (threshold %lld ms): ", static_cast<long long>(r.watchdog_threshold.count()));
    if (r.watchdog_reports.empty()) std::printf("no handler or driver call blocked the io thread\n");
    else std::printf("%zu reports\n", r.watchdog_reports.size());
    for (const std::string& line : r.watchdog_reports) std::printf("  %s\n", line.c_str());
  }
  if (!r.traced) return;
  std::printf("\ntraced pipelined run: %zu requests, %.0f requests/s, %zu spans%s\n", r.traced->requests,
              r.traced->requests_per_second(), r.trace_spans,
              r.trace_dropped ? " (some dropped at the recorder's cap)" : "");
  std::printf("%s", trace::to_text(r.overlap).c_str());
  std::printf("  time per request / bound per request (wall clock):    %.3f\n", r.wall_over_bound());
  if (r.overlap.critical == trace::stage::none)
    std::printf("  window / critical stage's busy time (trace):          n/a (no GPU spans were recorded)\n");
  else
    std::printf("  window / critical stage's busy time (trace):          %.3f\n", r.window_over_critical());
  if (r.overlap.critical != trace::stage::none)
    std::printf("  trace window / wall-clock time of the traced run:      %.3f\n", r.window_over_wall());
  std::printf("\ndiagnostics\n%s", r.diagnostics.text.c_str());
  std::printf("\nwritten: %s, %s\n", r.trace_file.c_str(), r.timeline_file.c_str());
}

void print_headline(const results& r) { std::printf("\nwhat this run shows: %s\n", r.headline().c_str()); }

void print_json(const results& r, int error_status, const std::string& error_kind, const std::string& error_message) {
  trace::json::writer w;
  w.begin_object().member("command", "demo");
  const jit_report& j = r.jit;
  w.key("jit").begin_object();
  w.key("nvrtc").begin_object().member("loaded", j.nvrtc_error.empty());
  if (!j.nvrtc_error.empty()) w.member("error", j.nvrtc_error);
  w.member("version", j.nvrtc_version).member("library", j.nvrtc_library).member("load_ms", j.nvrtc_load_ms);
  w.end_object();
  if (j.nvrtc_error.empty()) {
    w.member("target", j.target).member("target_reason", j.target_reason);
    w.member("image_bytes", static_cast<std::uint64_t>(j.image_bytes));
    w.member("cold_ms", j.cold_ms).member("memory_hit_ms", j.memory_hit_us / 1e3);
    w.key("disk_cache");
    if (j.cache_directory.empty()) {
      w.begin_object().member("enabled", false).member("note", j.cache_note).end_object();
    } else {
      w.begin_object().member("enabled", true).member("directory", j.cache_directory);
      w.member("first_outcome", j.disk_first_outcome).member("first_ms", j.disk_first_ms);
      w.member("hit_ms", j.disk_hit_ms).member("note", j.cache_note).end_object();
    }
  }
  w.end_object();
  w.key("gpu");
  if (!r.no_gpu.empty() || r.device_name.empty()) {
    w.null();
  } else {
    w.begin_object().member("device", r.device).member("name", r.device_name);
    w.member("compute_capability", r.compute_capability).member("copy_engines", r.copy_engines);
    w.member("kernel_load_ms", r.kernel_load_ms).member("request_bytes", static_cast<std::uint64_t>(r.request_bytes));
    w.member("kernel_iterations", r.kernel_iterations).member("rounds", static_cast<std::uint64_t>(r.rounds));
    w.member("threads", static_cast<std::uint64_t>(r.threads)).member("parts", static_cast<std::uint64_t>(r.parts));
    const gpu_stage_times& a = r.stages.alone;
    w.key("stages_alone_us").begin_object().member("h2d", a.h2d_us).member("kernel", a.kernel_us);
    w.member("d2h", a.d2h_us).member("copies_together", a.copies_together_us);
    w.member("bound", a.bound_us());
    w.member("preprocess", r.stages.preprocess_us).member("check", r.stages.check_us).end_object();
    const gpu_stage_times& l = r.stages.loaded;
    w.key("stages_loaded_us").begin_object().member("h2d", l.h2d_us).member("kernel", l.kernel_us);
    w.member("d2h", l.d2h_us).member("copies_together", l.copies_together_us).member("bound", l.bound_us());
    w.member("load_threads", static_cast<std::uint64_t>(r.stages.load_threads)).end_object();
    w.member("us_per_request", r.pipelined.merged().us_per_request());
    w.member("over_bound", r.over_bound()).member("over_loaded_bound", r.over_loaded_bound());
    w.member("headline", r.headline());
    variant_json(w, "pipelined", r.pipelined.merged());
    variant_json(w, "serial", r.serial.merged());
    const double serial_rps = r.serial.merged().requests_per_second();
    w.member("speedup", serial_rps > 0 ? r.pipelined.merged().requests_per_second() / serial_rps : 0.0);
    w.member("verified", r.verified());
    w.key("watchdog");
    if (!r.watchdog_threshold.count()) {
      w.null();
    } else {
      w.begin_object().member("threshold_ms", static_cast<std::uint64_t>(r.watchdog_threshold.count()));
      w.key("reports").begin_array();
      for (const std::string& line : r.watchdog_reports) w.value(line);
      w.end_array().end_object();
    }
    if (r.traced) {
      variant_json(w, "traced", *r.traced);
      w.member("trace_spans", static_cast<std::uint64_t>(r.trace_spans));
      w.member("trace_dropped", r.trace_dropped);
      w.key("overlap").raw(trace::to_json(r.overlap));
      const std::int64_t critical_ns =
          r.overlap.critical == trace::stage::none ? 0 : r.overlap.time_of(r.overlap.critical).busy_ns;
      w.member("critical_busy_per_request_us", per_request_us(critical_ns, r.traced->requests));
      w.member("wall_over_bound", r.wall_over_bound()).member("window_over_critical", r.window_over_critical());
      w.member("window_over_wall", r.window_over_wall());
      w.key("diagnostics").raw(r.diagnostics.json);
      w.key("files").begin_object().member("trace", r.trace_file).member("timeline", r.timeline_file).end_object();
    }
    w.end_object();
  }
  if (!r.no_gpu.empty()) w.member("no_gpu", r.no_gpu);
  if (error_status) {
    w.key("error").begin_object().member("command", "demo").member("status", error_status);
    w.member("kind", error_kind).member("message", error_message).end_object();
  }
  w.end_object();
  std::printf("%s\n", w.str().c_str());
}

}  // namespace cuasync::tools::demo
