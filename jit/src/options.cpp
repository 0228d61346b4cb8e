// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/options.hpp>

#include <array>

namespace cuasync::jit {

namespace {
// NVRTC options that change what it produces, by name without leading dashes. Passed after cuasync's own, one would
// override the target chosen for the device: an image the device may not load, cached under a key that lies.
struct target_changing_option {
  std::string_view name;
  std::string_view use_instead;
};
constexpr std::string_view use_target = "choose the architecture with the target (jit::target, or the device's "
                                        "compute capability with an output_request) instead";
constexpr std::string_view use_rdc = "set compile_options::relocatable_device_code instead";
constexpr std::array<target_changing_option, 13> target_changing_options{{
    {"arch", use_target},
    {"gpu-architecture", use_target},
    {"code", use_target},
    {"gpu-code", use_target},
    {"rdc", use_rdc},
    {"relocatable-device-code", use_rdc},
    {"dc", use_rdc},
    {"device-c", use_rdc},
    {"dw", use_rdc},
    {"device-w", use_rdc},
    {"dlto", "ask for LTO-IR with output_request::ltoir (or a target of kind ltoir) instead"},
    {"dlink-time-opt", "ask for LTO-IR with output_request::ltoir (or a target of kind ltoir) instead"},
    {"optix-ir", "cuasync loads CUBIN or PTX only"},
}};
}  // namespace

std::string refused_extra_option(std::string_view option) {
  if (!option.starts_with('-')) return {};
  // "-arch=sm_80", "--gpu-architecture sm_80" (one string) and "-arch" (its value in the next one) all name "arch".
  std::string_view name = option.substr(option.starts_with("--") ? 2 : 1);
  name = name.substr(0, name.find_first_of("= \t"));
  for (const auto& refused : target_changing_options)
    if (name == refused.name) {
      std::string why = "'";  // appended piece by piece: "'" + string&& trips GCC 12's -Wrestrict
      why.append(option).append("' changes what NVRTC produces and would override the target cuasync chose for the ");
      return why.append("device: ").append(refused.use_instead);
    }
  return {};
}

void compile_options::check(std::source_location where) const {
  constexpr const char* api = "cuasync::jit::compile_options";
  for (const auto& define : defines)
    if (define.first.empty()) cuasync::detail::throw_invalid(api, "a define with an empty name", where);
  if (max_registers && *max_registers <= 0)
    cuasync::detail::throw_invalid(api, "max_registers must be positive, not " + std::to_string(*max_registers),
                                   where);
  for (const auto& option : extra)
    if (std::string problem = refused_extra_option(option); !problem.empty())
      cuasync::detail::throw_invalid(api, "extra option " + problem, where);
}

std::vector<std::string> compile_options::arguments(const target& t, const std::string& pch_dir,
                                                   std::source_location where) const {
  check(where);
  std::vector<std::string> a;
  a.push_back("--gpu-architecture=" + t.architecture());
  if (t.kind == output_kind::ltoir) a.push_back("-dlto");
  if (!standard.empty()) a.push_back("--std=" + standard);
  for (const auto& [name, value] : defines) a.push_back(value.empty() ? "-D" + name : "-D" + name + "=" + value);
  for (const auto& dir : include_paths) a.push_back("-I" + dir);
  if (toolkit_includes)
    for (const auto& dir : toolkit_include_dirs()) a.push_back("-I" + dir);
  if (fast_math) a.push_back("--use_fast_math");
  if (fmad) a.push_back(*fmad ? "--fmad=true" : "--fmad=false");
  if (line_info) a.push_back("--generate-line-info");
  if (debug) a.push_back("--device-debug");
  if (relocatable_device_code) a.push_back("--relocatable-device-code=true");
  if (max_registers) a.push_back("--maxrregcount=" + std::to_string(*max_registers));
  if (precompiled_headers) {
    a.push_back("--pch");
    if (!pch_dir.empty()) a.push_back("--pch-dir=" + pch_dir);
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace cuasync::jit
