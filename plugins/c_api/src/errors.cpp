// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "abi.hpp"

#include <cuasync/driver/error.hpp>
#include <cuasync/jit/error.hpp>

#include <cstdlib>
#include <new>

namespace cuasync::c_api {

namespace {
cuasync_error out_of_memory{CUASYNC_ERROR_OUT_OF_MEMORY, 0, 0, "out of memory (while reporting an error)"};
// cuasync_get_api(major, NULL): the caller has no table to free an error with, so this one needs no freeing.
cuasync_error no_table{CUASYNC_ERROR_INVALID_ARGUMENT, 0, 0,
                       "cuasync_get_api: api is NULL (this error needs no error_destroy: no table to call it from)"};

// CUASYNC_DEBUG=1: messages keep cuasync's own file, line and function (for a report to its developers). Read at each
// error (errors are not a fast path), so that a process can turn it on once it meets a problem.
bool debug_messages() noexcept {
  const char* v = std::getenv("CUASYNC_DEBUG");
  return v && v[0] == '1' && v[1] == '\0';
}

cuasync_error_code code_of(const cuda_error& e) noexcept {
  if (dynamic_cast<const driver_not_found_error*>(&e) || dynamic_cast<const stub_library_error*>(&e) ||
      dynamic_cast<const no_device_error*>(&e) || dynamic_cast<const driver_too_old_error*>(&e))
    return CUASYNC_ERROR_NO_DRIVER;
  if (e.code().category() == nvrtc_category() || dynamic_cast<const jit::nvrtc_not_found_error*>(&e) ||
      dynamic_cast<const jit::compile_error*>(&e))
    return CUASYNC_ERROR_COMPILE;
  if (e.code().category() == cu_category()) {
    switch (e.result()) {
      case CUDA_ERROR_INVALID_VALUE: return CUASYNC_ERROR_INVALID_ARGUMENT;
      case CUDA_ERROR_OUT_OF_MEMORY: return CUASYNC_ERROR_OUT_OF_MEMORY;
      default: return CUASYNC_ERROR_CUDA;
    }
  }
  if (e.code() == std::errc::operation_canceled) return CUASYNC_ERROR_CANCELLED;
  return CUASYNC_ERROR_INTERNAL;
}
}  // namespace

cuasync_error* make_error(cuasync_error_code code, std::string message, int cuda_result, int nvrtc_result) noexcept {
  try {
    return new cuasync_error{code, cuda_result, nvrtc_result, std::move(message)};
  } catch (...) {
    return &out_of_memory;
  }
}

cuasync_error* current_error(const char* call) noexcept {
  try {
    throw;
  } catch (const abi_error& e) {
    // Most messages start with the call's name; the handle registry's ("stream is NULL") do not.
    if (e.message.rfind(call, 0) == 0) return make_error(e.code, e.message);
    return make_error(e.code, std::string(call) + ": " + e.message);
  } catch (const cuda_error& e) {
    const int cu = e.code().category() == cu_category() ? e.code().value() : 0;
    const int nv = e.code().category() == nvrtc_category() ? e.code().value() : 0;
    // The call site a cuda_error carries is this library's own code (the C ABI is its caller): a C or Python caller can
    // do nothing with it, so it is left out unless asked for.
    return make_error(code_of(e), std::string(call) + ": " + (debug_messages() ? e.what() : e.cause()), cu, nv);
  } catch (const std::bad_alloc&) {
    return make_error(CUASYNC_ERROR_OUT_OF_MEMORY, std::string(call) + ": out of memory");
  } catch (const std::exception& e) {
    return make_error(CUASYNC_ERROR_INTERNAL, std::string(call) + ": " + e.what());
  } catch (...) {
    return make_error(CUASYNC_ERROR_INTERNAL, std::string(call) + ": an unknown exception");
  }
}

cuasync_error* no_table_error() noexcept { return &no_table; }

void destroy_error(cuasync_error* e) noexcept {
  if (e && e != &out_of_memory && e != &no_table) delete e;
}

}  // namespace cuasync::c_api
