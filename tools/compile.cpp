// `cuasync compile`: compiles a .cu file with NVRTC for a given or detected architecture, through the JIT caches,
// and prints the target, the cache outcome, the lowered names of the name expressions and NVRTC's log. Works on a
// machine without a GPU.
#include "commands.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/jit.hpp>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace cuasync::tools {
namespace {

void compile_usage() {
  std::fprintf(stderr,
               "usage: cuasync compile FILE.cu [options]\n"
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
               "  -X OPTION                pass a raw NVRTC option\n"
               "  --output FILE            write the CUBIN / PTX / LTO-IR to FILE\n"
               "  --no-cache               compile without the disk cache\n");
}

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

}  // namespace

int compile(int argc, char** argv) {
  std::string file, output, arch;
  jit::output_request request = jit::output_request::automatic;
  jit::compile_options options;
  std::vector<std::string> expressions;
  bool use_cache = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cuasync compile: %s needs %s\n", a.c_str(), what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      compile_usage();
      return 0;
    } else if (a == "--arch" || a == "-arch") {
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
      if (!parse_int(value("a count"), n) || n <= 0) {
        std::fprintf(stderr, "cuasync compile: --max-registers needs a positive number\n");
        return 2;
      }
      options.max_registers = n;
    } else if (a == "--pch") {
      options.precompiled_headers = true;
    } else if (a == "-X") {
      options.extra.push_back(value("an NVRTC option"));
    } else if (a == "--output" || a == "-o") {
      output = value("a file");
    } else if (a == "--no-cache") {
      use_cache = false;
    } else if (!a.starts_with("-") && file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "cuasync compile: unknown option '%s'\n", a.c_str());
      compile_usage();
      return 2;
    }
  }
  if (file.empty()) {
    compile_usage();
    return 2;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cuasync compile: cannot open '%s'\n", file.c_str());
    return 2;
  }
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
      if (!parse_int(std::string_view(arch).substr(8), cc)) {
        std::fprintf(stderr, "cuasync compile: cannot read --arch %s\n", arch.c_str());
        return 2;
      }
      t = {request == jit::output_request::ltoir ? jit::output_kind::ltoir : jit::output_kind::ptx, cc};
      why = "--arch " + arch;
    } else if (!arch.empty()) {
      int cc = 0;
      if (!parse_int(arch.starts_with("sm_") ? std::string_view(arch).substr(3) : std::string_view(arch), cc)) {
        std::fprintf(stderr, "cuasync compile: cannot read --arch %s (use sm_90, 90 or compute_90)\n", arch.c_str());
        return 2;
      }
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

    std::printf("cuasync compile %s\n", file.c_str());
    std::printf("  %-14s %s (%s)\n", "NVRTC", nvrtc.version_string().c_str(), nvrtc.library.c_str());
    std::printf("  %-14s %s (%s)\n", "target", t.to_string().c_str(), why.c_str());
    if (compiler.disk())
      std::printf("  %-14s %s (%s)\n", "cache", jit::to_string(r.outcome), compiler.disk()->directory().c_str());
    else
      std::printf("  %-14s off\n", "cache");
    std::printf("  %-14s %zu bytes\n", to_string(t.kind), r->image.size());
    if (t.kind == jit::output_kind::ptx)
      if (auto isa = jit::parse_ptx_isa(r->text()))
        std::printf("  %-14s %s (needs a driver for CUDA %s or newer)\n", "PTX ISA", isa->to_string().c_str(),
                    jit::driver_version_for_ptx_isa(*isa).c_str());
    if (!r->lowered_names.empty()) {
      std::printf("  lowered names:\n");
      for (const auto& [expr, lowered] : r->lowered_names) std::printf("    %s -> %s\n", expr.c_str(), lowered.c_str());
    }
    std::printf("  %-14s %s\n", "log", r->log.empty() ? "(empty)" : "");
    if (!r->log.empty()) std::printf("%s\n", r->log.c_str());
    if (!output.empty()) {
      std::ofstream out(output, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(r->image.data()), static_cast<std::streamsize>(r->image.size()));
      if (!out) {
        std::fprintf(stderr, "cuasync compile: cannot write '%s'\n", output.c_str());
        return 1;
      }
      std::printf("  %-14s %s\n", "written", output.c_str());
    }
    return 0;
  } catch (const jit::compile_error& e) {
    std::fprintf(stderr, "cuasync compile: %s\n\nNVRTC log:\n%s\n", e.what(), e.log().c_str());
    return 1;
  } catch (const cuda_error& e) {
    std::fprintf(stderr, "cuasync compile: %s\n", e.what());
    return 1;
  }
}

}  // namespace cuasync::tools
