#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/options.hpp>

namespace cuasync::jit {

std::vector<std::string> compile_options::arguments(const target& t, const std::string& pch_dir,
                                                   std::source_location where) const {
  constexpr const char* api = "cuasync::jit::compile_options";
  std::vector<std::string> a;
  a.push_back("--gpu-architecture=" + t.architecture());
  if (t.kind == output_kind::ltoir) a.push_back("-dlto");
  if (!standard.empty()) a.push_back("--std=" + standard);
  for (const auto& [name, value] : defines) {
    if (name.empty()) cuasync::detail::throw_invalid(api, "a define with an empty name", where);
    a.push_back(value.empty() ? "-D" + name : "-D" + name + "=" + value);
  }
  for (const auto& dir : include_paths) a.push_back("-I" + dir);
  if (toolkit_includes)
    for (const auto& dir : toolkit_include_dirs()) a.push_back("-I" + dir);
  if (fast_math) a.push_back("--use_fast_math");
  if (fmad) a.push_back(*fmad ? "--fmad=true" : "--fmad=false");
  if (line_info) a.push_back("--generate-line-info");
  if (debug) a.push_back("--device-debug");
  if (relocatable_device_code) a.push_back("--relocatable-device-code=true");
  if (max_registers) {
    if (*max_registers <= 0)
      cuasync::detail::throw_invalid(api, "max_registers must be positive, not " + std::to_string(*max_registers),
                                     where);
    a.push_back("--maxrregcount=" + std::to_string(*max_registers));
  }
  if (precompiled_headers) {
    a.push_back("--pch");
    if (!pch_dir.empty()) a.push_back("--pch-dir=" + pch_dir);
  }
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace cuasync::jit
