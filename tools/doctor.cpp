// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync doctor`: a short self-test on a device (~ seconds): copy engines, pinned against pageable H2D bandwidth,
// the round trip of an awaited empty kernel, a short traced pipeline's overlap and diagnostics, then a verdict.
#include "commands.hpp"
#include "demo_kernels.hpp"
#include "doctor_checks.hpp"
#include "progress.hpp"

#include <cuasync/driver.hpp>
#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace cuasync::tools {
namespace {

using namespace std::chrono_literals;

struct findings {
  int copy_engines = 0;
  std::string name;
  doctor::bandwidth h2d;
  doctor::await_latency await;
  doctor::pipeline_check pipeline;
  std::vector<std::string> warnings, failures;
};

// The verdict's reasons: what deserves a look, with the threshold that flagged it.
void judge(findings& f) {
  if (f.copy_engines < 2)
    f.warnings.push_back(std::to_string(f.copy_engines) + " copy engine(s): H2D and D2H copies cannot overlap");
  if (f.h2d.pinned_gbps < 10)
    f.warnings.push_back("pinned H2D at " + std::to_string(f.h2d.pinned_gbps).substr(0, 5) +
                         " GB/s: below 10 GB/s (a narrow or shared PCIe link?)");
  if (f.h2d.pageable_gbps > 0 && f.h2d.pinned_gbps < 1.5 * f.h2d.pageable_gbps)
    f.warnings.push_back("pinned H2D is less than 1.5x pageable: pinned memory brings little here");
  if (f.await.p50_us > 100)
    f.warnings.push_back("an awaited empty kernel takes " + std::to_string(f.await.p50_us).substr(0, 6) +
                         " us (p50): over 100 us (a loaded host, or CUASYNC_POLL_POLICY=efficient?)");
  if (f.pipeline.diagnostics.findings)
    f.warnings.push_back(std::to_string(f.pipeline.diagnostics.findings) + " diagnostic finding(s) on the pipeline");
  if (f.pipeline.wrong)
    f.failures.push_back(std::to_string(f.pipeline.wrong) + " of the pipeline's responses were wrong");
}

std::string verdict(const findings& f) { return !f.failures.empty() ? "FAIL" : !f.warnings.empty() ? "WARN" : "OK"; }

void print_text(int device, const findings& f) {
  const auto& o = f.pipeline.overlap;
  std::printf("cuasync doctor: GPU %d, %s\n", device, f.name.c_str());
  std::printf("  %-34s %d\n", "copy engines (asyncEngineCount)", f.copy_engines);
  std::printf("  %-34s pinned %.1f GB/s, pageable %.1f GB/s (%.1fx)\n",
              ("H2D " + std::to_string(f.h2d.bytes >> 20) + " MiB").c_str(), f.h2d.pinned_gbps, f.h2d.pageable_gbps,
              f.h2d.pageable_gbps > 0 ? f.h2d.pinned_gbps / f.h2d.pageable_gbps : 0);
  std::printf("  %-34s p50 %.1f us, p99 %.1f us (%zu samples)\n", "co_await an empty kernel", f.await.p50_us,
              f.await.p99_us, f.await.samples);
  std::printf("  %-34s %zu requests, %zu wrong, %zu spans, overlap factor %.2f, critical stage %s\n",
              "traced pipeline (3 slots, 1 MiB)", f.pipeline.requests, f.pipeline.wrong, f.pipeline.spans,
              o.overlap_factor(), std::string(trace::to_string(o.critical)).c_str());
  std::printf("\ndiagnostics\n%s\n", f.pipeline.diagnostics.text.c_str());
  std::printf("verdict: %s\n", verdict(f).c_str());
  for (const auto& w : f.failures) std::printf("  FAIL: %s\n", w.c_str());
  for (const auto& w : f.warnings) std::printf("  WARN: %s\n", w.c_str());
}

// The findings; a failed self-test carries the documented {"error": ...} member too.
int print_json(const invocation& inv, int device, const findings& f) {
  trace::json::writer w;
  w.begin_object().member("device", device).member("name", f.name).member("copy_engines", f.copy_engines);
  w.key("h2d").begin_object().member("bytes", static_cast<std::uint64_t>(f.h2d.bytes));
  w.member("pinned_gbps", f.h2d.pinned_gbps).member("pageable_gbps", f.h2d.pageable_gbps).end_object();
  w.key("await_empty_kernel").begin_object().member("samples", static_cast<std::uint64_t>(f.await.samples));
  w.member("p50_us", f.await.p50_us).member("p99_us", f.await.p99_us).end_object();
  w.key("pipeline").begin_object().member("requests", static_cast<std::uint64_t>(f.pipeline.requests));
  w.member("wrong", static_cast<std::uint64_t>(f.pipeline.wrong));
  w.member("spans", static_cast<std::uint64_t>(f.pipeline.spans));
  w.key("overlap").raw(trace::to_json(f.pipeline.overlap)).end_object();
  w.key("diagnostics").raw(f.pipeline.diagnostics.json);
  w.member("verdict", verdict(f));
  w.key("warnings").begin_array();
  for (const auto& s : f.warnings) w.value(s);
  w.end_array().key("failures").begin_array();
  for (const auto& s : f.failures) w.value(s);
  w.end_array();
  if (!f.failures.empty()) {
    std::string why = "the self-test failed:";
    for (const auto& s : f.failures) why += " " + s + ";";
    why.pop_back();
    return inv.fail_within(w, exit_failure, "self_test_failed", why);
  }
  w.end_object();
  std::printf("%s\n", w.str().c_str());
  return exit_ok;
}

struct doctor_args {
  int device = 0;
  bool ptx = false;
};

int run(invocation& inv, const doctor_args& a) {
  const int device = a.device;
  const bool ptx = a.ptx;
  progress prog("cuasync doctor");
  findings f;
  try {
    if (const std::string why = why_no_gpu(device); !why.empty())
      return inv.fail(exit_no_gpu, "no_gpu", "no usable GPU: " + why);
    auto rt = runtime::device_runtime::create(device);  // its own, destroyed before exit
    f.name = rt->properties().name;
    f.copy_engines = rt->properties().async_engine_count;
    prog.phase("compiling the test kernels");
    const jit::program program(tools::demo::kernel_program_name, tools::demo::kernel_source);
    const auto request = ptx ? jit::output_request::ptx : jit::output_request::automatic;
    kernel_ref empty = rt->kernels().kernel(rt->context(), program, "demo_empty", {}, request);
    kernel_ref infer = rt->kernels().kernel(rt->context(), program, "demo_infer", {}, request);
    prog.phase("H2D bandwidth, pinned and pageable");
    f.h2d = doctor::measure_h2d(*rt, std::size_t{64} << 20, 5, 30s);
    prog.phase("awaiting empty kernels");
    f.await = doctor::measure_await(*rt, empty, 500, 30s);
    prog.phase("a short traced pipeline");
    f.pipeline = doctor::traced_pipeline(*rt, infer, 30s);
  } catch (const cuda_error& e) {
    prog.done();
    return inv.fail(e);
  } catch (const std::exception& e) {
    prog.done();
    return inv.fail(exit_failure, "error", e.what());  // not a cuda_error: no call site in it
  }
  prog.done();
  judge(f);
  if (inv.json()) return print_json(inv, device, f);
  print_text(device, f);
  return f.failures.empty() ? exit_ok : exit_failure;
}

runner declare(option_set& o) {
  auto a = std::make_shared<doctor_args>();
  o.number("--device", a->device, 0, 1024, "N", "the GPU (default 0)", "a device ordinal (0, 1, ...)");
  o.flag("--ptx", a->ptx, "load the test kernels as PTX, compiled by the driver (default: a CUBIN for the GPU)");
  return [a](invocation& inv) { return run(inv, *a); };
}

}  // namespace

const command doctor_command{
    .name = "doctor",
    .summary = "a short self-test of a GPU: copy engines, pinned vs pageable bandwidth, await latency, diagnostics",
    .description =
        "A self-test of a few seconds on GPU N (default 0): the copy engines, H2D bandwidth of 64 MiB from pinned and "
        "from pageable memory, the round trip of co_await on an empty kernel (p50, p99), and a short traced run of "
        "the demo's pipeline (overlap summary and diagnostics, responses checked). Ends with a verdict: OK, WARN with "
        "the reasons, or FAIL (wrong results: status 1). Without a GPU it says why and exits 3.",
    .declare = declare,
    .notes = "A progress line goes to standard error (CUASYNC_PROGRESS=0: none).",
};

}  // namespace cuasync::tools
