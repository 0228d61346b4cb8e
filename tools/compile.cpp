// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync compile`: compiles a .cu file with NVRTC for a given or detected architecture, through the JIT caches,
// and prints the target, the cache outcome, the lowered names of the name expressions and NVRTC's log. Works on a
// machine without a GPU.
#include "commands.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/trace/json.hpp>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <memory>
#include <string>

namespace cuasync::tools {
namespace {

bool parse_int(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

// The device's compute capability, or nothing with the reason when there is no usable GPU.
std::optional<int> detect_device(std::string& name, std::string& why_not) {
  try {
    if (device::count() == 0) {
      why_not = "the driver reports no device";
      return std::nullopt;
    }
    const device d = device::get(0);
    name = d.name();
    return d.compute_capability();
  } catch (const cuda_error& e) {
    why_not = e.detail().empty() ? e.code().message() : e.detail().substr(0, e.detail().find(". "));
    return std::nullopt;
  }
}

// What a compile printed, kept for the text and the JSON forms.
struct compile_report {
  std::string file, nvrtc_version, nvrtc_library, target, architecture, target_kind, why, cache_outcome,
      cache_directory;
  std::size_t image_bytes = 0;
  std::string ptx_isa, ptx_needs_driver;
  std::vector<std::pair<std::string, std::string>> lowered_names;
  std::string log, written;
};

void print_text(const compile_report& r) {
  std::printf("cuasync compile %s\n", r.file.c_str());
  std::printf("  %-14s %s (%s)\n", "NVRTC", r.nvrtc_version.c_str(), r.nvrtc_library.c_str());
  std::printf("  %-14s %s (%s)\n", "target", r.target.c_str(), r.why.c_str());
  if (!r.cache_directory.empty())
    std::printf("  %-14s %s (%s)\n", "cache", r.cache_outcome.c_str(), r.cache_directory.c_str());
  else
    std::printf("  %-14s off\n", "cache");
  std::printf("  %-14s %zu bytes\n", r.target_kind.c_str(), r.image_bytes);
  if (!r.ptx_isa.empty())
    std::printf("  %-14s %s (needs a driver for CUDA %s or newer)\n", "PTX ISA", r.ptx_isa.c_str(),
                r.ptx_needs_driver.c_str());
  if (!r.lowered_names.empty()) {
    std::printf("  lowered names:\n");
    for (const auto& [expr, lowered] : r.lowered_names) std::printf("    %s -> %s\n", expr.c_str(), lowered.c_str());
  }
  std::printf("  %-14s %s\n", "log", r.log.empty() ? "(empty)" : "");
  if (!r.log.empty()) std::printf("%s\n", r.log.c_str());
  if (!r.written.empty()) std::printf("  %-14s %s\n", "written", r.written.c_str());
}

void print_json(const compile_report& r) {
  trace::json::writer w;
  w.begin_object().member("file", r.file);
  w.key("nvrtc").begin_object().member("version", r.nvrtc_version).member("library", r.nvrtc_library).end_object();
  // Identifiers for scripts: "sm_90", "cubin", "disk_hit" (the text form says "CUBIN sm_90", "disk hit").
  auto identifier = [](std::string s) {
    for (char& c : s) c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  w.key("target").begin_object().member("architecture", r.architecture).member("kind", identifier(r.target_kind));
  w.member("reason", r.why).end_object();
  w.key("cache");
  if (r.cache_directory.empty())
    w.null();
  else
    w.begin_object().member("outcome", identifier(r.cache_outcome)).member("directory", r.cache_directory).end_object();
  w.member("image_bytes", static_cast<std::uint64_t>(r.image_bytes));
  if (!r.ptx_isa.empty()) w.member("ptx_isa", r.ptx_isa).member("ptx_needs_driver", r.ptx_needs_driver);
  w.key("lowered_names").begin_object();
  for (const auto& [expr, lowered] : r.lowered_names) w.member(expr, lowered);
  w.end_object().member("log", r.log).key("written");
  if (r.written.empty())
    w.null();
  else
    w.value(r.written);
  w.end_object();
  std::printf("%s\n", w.str().c_str());
}

// The command line, as option_set parsed it.
struct compile_args {
  std::string file, output, arch, standard;
  bool ptx = false, ltoir = false, fast_math = false, line_info = false, debug = false, rdc = false, pch = false,
       no_cache = false;
  int max_registers = 0;
  std::vector<std::string> defines, includes, expressions, extra;
};

// The names of NVRTC's architectures: "sm_75, sm_80, ..., sm_121".
std::string arch_list(const std::vector<int>& archs) {
  std::string list;
  for (int a : archs) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return list;
}

int run(invocation& inv, const compile_args& a) {
  const std::string& file = a.file;
  const std::string& output = a.output;
  const std::string& arch = a.arch;
  if (a.ptx && a.ltoir) return inv.usage_error("--ptx and --ltoir ask for different outputs: give one");
  const jit::output_request request =
      a.ptx ? jit::output_request::ptx : a.ltoir ? jit::output_request::ltoir : jit::output_request::automatic;
  jit::compile_options options;
  for (const std::string& d : a.defines) {
    const auto eq = d.find('=');
    options.define(d.substr(0, eq), eq == std::string::npos ? std::string() : d.substr(eq + 1));
  }
  for (const std::string& dir : a.includes) options.include(dir);
  if (!a.standard.empty()) options.standard = a.standard;
  options.fast_math = a.fast_math;
  options.line_info = a.line_info;
  options.debug = a.debug;
  options.relocatable_device_code = a.rdc;
  if (a.max_registers) options.max_registers = a.max_registers;
  options.precompiled_headers = a.pch;
  for (const std::string& x : a.extra) {
    const std::string refused = jit::refused_extra_option(x);
    if (!refused.empty()) return inv.usage_error("-X " + refused + " (here: --arch, --ptx, --ltoir or --rdc)");
    options.extra.push_back(x);
  }
  const std::vector<std::string>& expressions = a.expressions;
  const bool use_cache = !a.no_cache;
  // --arch: compute_NN (PTX), sm_NN or NN; whether NVRTC supports it is known once NVRTC is loaded.
  int arch_cc = 0;
  const bool arch_ptx = arch.starts_with("compute_");
  if (!arch.empty()) {
    const std::string_view digits = arch_ptx                  ? std::string_view(arch).substr(8)
                                    : arch.starts_with("sm_") ? std::string_view(arch).substr(3)
                                                              : std::string_view(arch);
    if (!parse_int(digits, arch_cc) || arch_cc <= 0)
      return inv.usage_error("cannot read --arch " + arch + ": use sm_90, 90 or compute_90");
  }
  if (file.empty()) return inv.usage_error("no FILE.cu given");
  std::error_code dir_ec;
  if (std::filesystem::is_directory(file, dir_ec))
    return inv.usage_error("'" + file + "' is a directory, not a source");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return inv.fail(exit_failure, "io_error", "cannot open '" + file + "': " + std::generic_category().message(errno));
  std::stringstream source;
  source << in.rdbuf();
  const std::filesystem::path path(file);
  options.include(path.has_parent_path() ? path.parent_path().string() : ".");

  try {
    const jit::nvrtc_info& nvrtc = jit::nvrtc_library();
    jit::program p(path.filename().string(), source.str());
    for (auto& e : expressions) p.add_name_expression(e);

    // The target: --arch (one NVRTC supports), else the device, else the most portable PTX.
    jit::target t;
    std::string why;
    if (!arch.empty()) {
      if (!nvrtc.supports(arch_cc))
        return inv.usage_error("--arch " + arch + ": NVRTC " + nvrtc.version_string() +
                               " cannot compile for it. It supports " + arch_list(nvrtc.supported_archs) +
                               "; for a GPU newer than these, --arch compute_" +
                               std::to_string(nvrtc.supported_archs.back()) + " gives PTX that it runs");
      if (arch_ptx)
        t = {request == jit::output_request::ltoir ? jit::output_kind::ltoir : jit::output_kind::ptx, arch_cc};
      else
        t = jit::select_target(arch_cc, request);
      why = "--arch " + arch;
    } else {
      std::string device_name, why_not;
      if (auto cc = detect_device(device_name, why_not)) {
        t = jit::select_target(*cc, request);
        why = "device 0: " + device_name + ", compute capability " + std::to_string(*cc / 10) + "." +
              std::to_string(*cc % 10);
      } else {
        const int oldest = nvrtc.supported_archs.front();
        t = {request == jit::output_request::ltoir ? jit::output_kind::ltoir : jit::output_kind::ptx, oldest};
        why = "no GPU (" + why_not + "): the oldest architecture NVRTC supports, runs on every newer GPU; use "
              "--arch to choose";
      }
    }

    jit::disk_cache_settings settings = jit::disk_cache_settings::from_environment();
    if (!use_cache) settings.enabled = false;
    jit::compiler compiler(settings);
    const jit::compile_result r = compiler.compile(p, t, options);

    compile_report report;
    report.file = file;
    report.nvrtc_version = nvrtc.version_string();
    report.nvrtc_library = nvrtc.library;
    report.target = t.to_string();
    report.architecture = t.architecture();
    report.target_kind = to_string(t.kind);
    report.why = why;
    if (compiler.disk()) {
      report.cache_outcome = jit::to_string(r.outcome);
      report.cache_directory = compiler.disk()->directory().string();
    }
    report.image_bytes = r->image.size();
    if (t.kind == jit::output_kind::ptx)
      if (auto isa = jit::parse_ptx_isa(r->text())) {
        report.ptx_isa = isa->to_string();
        report.ptx_needs_driver = jit::driver_version_for_ptx_isa(*isa);
      }
    report.lowered_names.assign(r->lowered_names.begin(), r->lowered_names.end());
    report.log = r->log;
    if (!output.empty()) {
      std::ofstream out(output, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(r->image.data()), static_cast<std::streamsize>(r->image.size()));
      if (!out) return inv.fail(exit_failure, "io_error", "cannot write '" + output + "'");
      report.written = output;
    }
    if (inv.json())
      print_json(report);
    else
      print_text(report);
    return exit_ok;
  } catch (const jit::compile_error& e) {
    const int status = inv.fail(exit_failure, "compile_error", error_text(e), {{"log", e.log()}});
    if (!inv.json()) std::fprintf(stderr, "\nNVRTC log:\n%s\n", e.log().c_str());
    return status;
  } catch (const cuda_error& e) {
    return inv.fail(e, "nvrtc_error");
  }
}

runner declare(option_set& o) {
  auto a = std::make_shared<compile_args>();
  o.positional("FILE.cu", a->file, "the CUDA C++ source to compile");
  o.text("--arch", a->arch, "ARCH",
         "sm_90 or 90 (a CUBIN when NVRTC supports it, else PTX), compute_90 (PTX); one NVRTC supports (another is "
         "a usage error listing them); default: device 0's architecture, or without a GPU, PTX for the oldest "
         "architecture NVRTC supports");
  o.flag("--ptx", a->ptx, "PTX instead of a CUBIN");
  o.flag("--ltoir", a->ltoir, "LTO-IR instead of a CUBIN");
  o.texts("-D", a->defines, "NAME[=VALUE]", "define a macro (also -DNAME=VALUE); repeatable");
  o.texts("-I", a->includes, "DIR", "add an include directory (also -IDIR); FILE's directory is always added");
  o.texts("-e,--name-expression", a->expressions, "EXPR",
          "a template instantiation or kernel to get the lowered name of (e.g. 'saxpy<float>'); repeatable");
  o.text("--std", a->standard, "STD", "the language standard (e.g. c++17)");
  o.flag("--fast-math", a->fast_math, "NVRTC's --use_fast_math");
  o.flag("--line-info", a->line_info, "line information for profilers");
  o.flag("-G,--debug", a->debug, "device debug information");
  o.flag("--rdc", a->rdc, "relocatable device code");
  o.number("--max-registers", a->max_registers, 1, 1 << 16, "N", "registers per thread at most",
           "a positive number of registers");
  o.flag("--pch", a->pch, "NVRTC's automatic precompiled headers");
  o.texts("-X", a->extra, "OPTION",
          "pass a raw NVRTC option (not one that sets the target: -arch, -rdc, -dlto); repeatable");
  o.text("-o,--output", a->output, "FILE", "write the CUBIN / PTX / LTO-IR to FILE");
  o.flag("--no-cache", a->no_cache, "compile without the disk cache");
  return [a](invocation& inv) { return run(inv, *a); };
}

}  // namespace

const command compile_command{
    .name = "compile",
    .summary = "compile a .cu file with NVRTC, through the JIT caches (no GPU needed)",
    .description =
        "Compiles FILE.cu with NVRTC (loaded at run time) through cuasync's memory and disk caches, and prints the "
        "target, the cache outcome (miss, disk hit), the lowered names of the name expressions and NVRTC's log. No "
        "GPU is needed.",
    .declare = declare,
    .notes = "Environment: CUASYNC_LIBNVRTC, CUASYNC_CACHE_DIR, CUASYNC_CACHE_SIZE, CUASYNC_CACHE=0 (see the "
             "README).",
};

}  // namespace cuasync::tools
