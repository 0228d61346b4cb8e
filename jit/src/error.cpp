// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/detail/nvrtc_api.hpp>
#include <cuasync/jit/error.hpp>

namespace cuasync {
namespace {

// Names for every result of NVRTC 13.0, for when no NVRTC is loaded.
const char* builtin_name(int r) {
  switch (r) {
    case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return "NVRTC_ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return "NVRTC_ERROR_PROGRAM_CREATION_FAILURE";
    case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return "NVRTC_ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
    case NVRTC_ERROR_COMPILATION: return "NVRTC_ERROR_COMPILATION";
    case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: return "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE";
    case NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION: return "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION";
    case NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION: return "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION";
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID: return "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID";
    case NVRTC_ERROR_INTERNAL_ERROR: return "NVRTC_ERROR_INTERNAL_ERROR";
    case NVRTC_ERROR_TIME_FILE_WRITE_FAILED: return "NVRTC_ERROR_TIME_FILE_WRITE_FAILED";
    case NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED: return "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED";
    case NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED: return "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED";
    case NVRTC_ERROR_PCH_CREATE: return "NVRTC_ERROR_PCH_CREATE";
    case NVRTC_ERROR_CANCELLED: return "NVRTC_ERROR_CANCELLED";
    case NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED: return "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED";
    default: return nullptr;
  }
}

class nvrtc_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nvrtc"; }
  std::string message(int r) const override {
    if (const char* builtin = builtin_name(r)) return builtin;
    // A result newer than this table: NVRTC may know it ("NVRTC_ERROR unknown" when it does not).
    if (auto* n = jit::detail::nvrtc_if_loaded())
      if (const char* name = n->nvrtcGetErrorString(static_cast<nvrtcResult>(r));
          name && std::string_view(name).find("unknown") == std::string_view::npos)
        return name;
    return "nvrtcResult " + std::to_string(r);
  }
};

std::string compose_compile(const std::string& program, const std::string& first_error) {
  return "program '" + program + "' failed to compile" + (first_error.empty() ? "" : ":\n" + first_error);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

}  // namespace

const std::error_category& nvrtc_category() noexcept {
  // Never destroyed: a cuasync thread still running at exit (a background task past the exit wait) may build an
  // error after static destruction, and a destroyed category's message() crashed there.
  static const nvrtc_category_impl* instance = new nvrtc_category_impl;
  return *instance;
}

namespace jit {

compile_error::compile_error(nvrtcResult result, std::string program_name, std::vector<std::string> options,
                             std::string log, std::string first_error, std::source_location where)
    : cuda_error(make_error_code(result), "nvrtcCompileProgram",
                 compose_compile(program_name, first_error) + "\noptions: " + join(options), where),
      program_name_(std::move(program_name)),
      options_(std::move(options)),
      log_(std::move(log)),
      first_error_(std::move(first_error)) {}

namespace detail {
void throw_nvrtc(nvrtcResult r, const char* api, std::string what, std::source_location where) {
  throw cuda_error(make_error_code(r), api, std::move(what), where);
}
}  // namespace detail

}  // namespace jit
}  // namespace cuasync
