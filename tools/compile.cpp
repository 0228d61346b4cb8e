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
#include <stdexcept>
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

int run(invocation& inv) {
  std::string file, output, arch;
  jit::output_request request = jit::output_request::automatic;
  jit::compile_options options;
  std::vector<std::string> expressions;
  bool use_cache = true;
  argument_walker args(inv.args());
  while (!args.done()) {
    const std::string a = args.next();
    std::string v;
    auto value = [&](const char* what) {
      if (!args.value(v)) throw std::invalid_argument(a + " needs " + what);
      return v;
    };
    try {
      if (a == "--arch" || a == "-arch") {
        arch = value("an architecture");
      } else if (a == "--ptx") {
        request = jit::output_request::ptx;
      } else if (a == "--ltoir") {
        request = jit::output_request::ltoir;
      } else if (a == "-D" || (a.starts_with("-D") && a.size() > 2)) {
        const std::string d = a == "-D" ? value("NAME[=VALUE]") : a.substr(2);
        const auto eq = d.find('=');
        options.define(d.substr(0, eq), eq == std::string::npos ? std::string() : d.substr(eq + 1));
      } else if (a == "-I" || (a.starts_with("-I") && a.size() > 2)) {
        options.include(a == "-I" ? value("a directory") : a.substr(2));
      } else if (a == "--name-expression" || a == "-e") {
        expressions.push_back(value("an expression"));
      } else if (a == "--std") {
        options.standard = value("a standard");
      } else if (a == "--fast-math") {
        options.fast_math = true;
      } else if (a == "--line-info") {
        options.line_info = true;
      } else if (a == "--debug" || a == "-G") {
        options.debug = true;
      } else if (a == "--rdc") {
        options.relocatable_device_code = true;
      } else if (a == "--max-registers") {
        int n = 0;
        if (!parse_int(value("a count"), n) || n <= 0) return inv.usage_error("--max-registers needs a positive number");
        options.max_registers = n;
      } else if (a == "--pch") {
        options.precompiled_headers = true;
      } else if (a == "-X") {
        const std::string refused = jit::refused_extra_option(value("an NVRTC option"));
        if (!refused.empty()) return inv.usage_error("-X " + refused + " (here: --arch, --ptx, --ltoir or --rdc)");
        options.extra.push_back(v);
      } else if (a == "--output" || a == "-o") {
        output = value("a file");
      } else if (a == "--no-cache") {
        use_cache = false;
      } else if (!a.starts_with("-") && file.empty()) {
        file = a;
      } else {
        return inv.usage_error("unknown option '" + a + "'");
      }
    } catch (const std::invalid_argument& e) {
      return inv.usage_error(e.what());
    }
  }
  if (file.empty()) return inv.usage_error("no FILE.cu given");
  std::error_code dir_ec;
  if (std::filesystem::is_directory(file, dir_ec)) return inv.usage_error("'" + file + "' is a directory, not a source");
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

    // The target: --arch, else the device, else the most portable PTX.
    jit::target t;
    std::string why;
    if (arch.starts_with("compute_")) {
      int cc = 0;
      if (!parse_int(std::string_view(arch).substr(8), cc)) return inv.usage_error("cannot read --arch " + arch);
      t = {request == jit::output_request::ltoir ? jit::output_kind::ltoir : jit::output_kind::ptx, cc};
      why = "--arch " + arch;
    } else if (!arch.empty()) {
      int cc = 0;
      if (!parse_int(arch.starts_with("sm_") ? std::string_view(arch).substr(3) : std::string_view(arch), cc))
        return inv.usage_error("cannot read --arch " + arch + " (use sm_90, 90 or compute_90)");
      t = jit::select_target(cc, request);
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
    const int status = inv.fail(exit_failure, "compile_error", e.what(), {{"log", e.log()}});
    if (!inv.json()) std::fprintf(stderr, "\nNVRTC log:\n%s\n", e.log().c_str());
    return status;
  } catch (const cuda_error& e) {
    return inv.fail(e, "nvrtc_error");
  }
}

}  // namespace

const command compile_command{
    "compile", "compile a .cu file with NVRTC, through the JIT caches (no GPU needed)",
    "usage: cuasync compile FILE.cu [options]\n"
    "Compiles FILE.cu with NVRTC (loaded at run time) through cuasync's memory and disk caches, and prints the\n"
    "target, the cache outcome (miss, disk hit), the lowered names of the name expressions and NVRTC's log.\n"
    "  --arch A                 sm_90 or 90 (CUBIN when NVRTC supports it, else PTX), compute_90 (PTX);\n"
    "                           default: device 0's architecture, or without a GPU, PTX for the oldest\n"
    "                           architecture NVRTC supports\n"
    "  --ptx | --ltoir          PTX or LTO-IR instead of a CUBIN\n"
    "  -D NAME[=VALUE]          define a macro (also -DNAME=VALUE)\n"
    "  -I DIR                   add an include directory (also -IDIR); FILE's directory is always added\n"
    "  --name-expression EXPR   a template instantiation or kernel to get the lowered name of\n"
    "                           (e.g. 'saxpy<float>'); repeatable\n"
    "  --std c++17              language standard\n"
    "  --fast-math, --line-info, --debug, --rdc, --max-registers N, --pch\n"
    "  -X OPTION                pass a raw NVRTC option (not one that sets the target: -arch, -rdc, -dlto)\n"
    "  -o, --output FILE        write the CUBIN / PTX / LTO-IR to FILE\n"
    "  --no-cache               compile without the disk cache\n"
    "Environment: CUASYNC_LIBNVRTC, CUASYNC_CACHE_DIR, CUASYNC_CACHE_SIZE, CUASYNC_CACHE=0 (see the README).\n",
    run};

}  // namespace cuasync::tools
