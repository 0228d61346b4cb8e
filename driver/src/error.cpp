// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/driver_log.hpp>
#include <cuasync/driver/error.hpp>

#include <cstdio>
#include <cstring>

namespace cuasync {
namespace {

// Names for the results that can occur before a driver is loaded (or when none can be).
const char* builtin_name(int r) {
  switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_FILE_NOT_FOUND: return "CUDA_ERROR_FILE_NOT_FOUND";  // module::load_file
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return nullptr;
  }
}

class cu_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda"; }
  std::string message(int r) const override {
    const char* name = nullptr;
    const char* text = nullptr;
    if (auto* d = detail::driver_if_loaded()) {
      d->cuGetErrorName(static_cast<CUresult>(r), &name);
      d->cuGetErrorString(static_cast<CUresult>(r), &text);
    }
    if (!name) name = builtin_name(r);
    std::string out = name ? name : "CUresult " + std::to_string(r);
    if (text) out += std::string(" (") + text + ")";
    return out;
  }
};

// `where` null: without the call site (cuda_error::cause).
std::string compose(const std::error_code& code, const std::string& api, const std::string& detail,
                    const std::string& driver_log, const std::source_location* where) {
  std::string msg = api + ": " + code.message();
  if (!detail.empty()) msg += " [" + detail + "]";
  if (where) {
    const char* file = where->file_name();
    if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
    msg += " at " + std::string(file) + ":" + std::to_string(where->line()) + " in " + where->function_name();
  }
  if (code.category() == cu_category() && is_sticky(static_cast<CUresult>(code.value())))
    msg += ". The error is sticky: the context can run nothing more. Destroy every object of the context (for a "
           "primary context: release it everywhere) and start anew";
  if (!driver_log.empty()) msg += "; the driver says: " + driver_log;
  return msg;
}

}  // namespace

const std::error_category& cu_category() noexcept {
  // Never destroyed: a cuasync thread still running at exit (a background task past the exit wait) may build an
  // error after static destruction, and a destroyed category's message() crashed there.
  static const cu_category_impl* instance = new cu_category_impl;
  return *instance;
}

cuda_error::cuda_error(std::error_code code, std::string api, std::string detail, std::source_location where)
    : cuda_error(code, std::move(api), std::move(detail), std::string(), where) {}

cuda_error::cuda_error(std::error_code code, std::string api, std::string detail, std::string driver_log,
                       std::source_location where)
    : std::system_error(code),
      api_(std::move(api)),
      detail_(std::move(detail)),
      driver_log_(std::move(driver_log)),
      where_(where),
      text_(compose(code, api_, detail_, driver_log_, &where)) {}

std::string cuda_error::cause() const { return compose(code(), api_, detail_, driver_log_, nullptr); }

CUresult cuda_error::result() const noexcept {
  return code().category() == cu_category() ? static_cast<CUresult>(code().value()) : CUDA_ERROR_UNKNOWN;
}

bool cuda_error::sticky() const noexcept {
  return code().category() == cu_category() && is_sticky(static_cast<CUresult>(code().value()));
}

bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEINITIALIZED:
      return true;
    default:
      return false;
  }
}

namespace detail {

std::string cause_of(const std::exception_ptr& failure) noexcept {
  try {
    try {
      std::rethrow_exception(failure);
    } catch (const cuda_error& e) {
      return e.cause();
    } catch (const std::exception& e) {
      return e.what();
    }
  } catch (...) {
  }
  return "an unknown error";
}

void throw_cu(CUresult r, const char* api, std::string what, std::source_location where) {
  throw cuda_error(make_error_code(r), api, std::move(what), take_driver_log(api), where);
}

void throw_invalid(const char* api, std::string what, std::source_location where) {
  throw cuda_error(make_error_code(CUDA_ERROR_INVALID_VALUE), api, std::move(what), where);
}

std::string handle_string(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace detail
}  // namespace cuasync
