// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Errors of the driver layer: one exception type for every failed CUDA call or rejected argument.

#include <cuda.h>

#include <exception>
#include <source_location>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cuasync {

//! The `std::error_category` of `CUresult` values: names and descriptions come from the loaded driver
//! (`cuGetErrorName` / `cuGetErrorString`), or from a built-in table when no driver could be loaded.
const std::error_category& cu_category() noexcept;

//! A `std::error_code` in `cu_category()`.
inline std::error_code make_error_code(CUresult r) noexcept { return {static_cast<int>(r), cu_category()}; }

//! The one exception type of cuasync. It carries the error code (`cu_category()` for driver results, the NVRTC
//! category for compiles), the API that failed, what it concerned (kernel, stream, device, sizes) and the call site.
//! `what()` reads e.g.
//! `cuLaunchKernelEx: CUDA_ERROR_INVALID_VALUE (invalid argument) [kernel 'saxpy', stream 0x5a.., device 0]
//!  at launch.cpp:41 in void f()`, followed by `; the driver says: ...` when the driver logged the failure.
class cuda_error : public std::system_error {
 public:
  cuda_error(std::error_code code, std::string api, std::string detail,
             std::source_location where = std::source_location::current());
  //! As above, with the driver's own text about the failure (`driver_log()`), which `what()` and `cause()` end with.
  cuda_error(std::error_code code, std::string api, std::string detail, std::string driver_log,
             std::source_location where);

  //! The API call (`cuMemcpyAsync`) or cuasync function (`cuasync::copy_async`) that failed.
  const std::string& api() const noexcept { return api_; }
  //! What the call concerned: the kernel, stream, device, sizes, ... (may be empty).
  const std::string& detail() const noexcept { return detail_; }
  //! The driver's own log lines about this failure (drivers for CUDA 12.9+, see cuasync/driver/driver_log.hpp), at
  //! most `driver_log::max_error_bytes`; empty when the driver said nothing or the error was not the driver's.
  const std::string& driver_log() const noexcept { return driver_log_; }
  //! Where the failing call was made.
  const std::source_location& where() const noexcept { return where_; }
  //! The text above (`std::system_error` would append ": " and the status a second time).
  const char* what() const noexcept override { return text_.what(); }
  //! `what()` without " at FILE:LINE in FUNCTION": the API, the status, the detail. For boundaries (the C ABI, a
  //! command's output) where the call site is cuasync's own code, not the caller's. @throws std::bad_alloc
  std::string cause() const;
  //! The `CUresult`, or `CUDA_ERROR_UNKNOWN` when the code is not in `cu_category()`.
  CUresult result() const noexcept;
  //! A sticky error (a kernel faulted: illegal address, trap, assert, ...): the context can run nothing more. Every
  //! object of it must be destroyed (a primary context released by all its users) before the device is used again.
  bool sticky() const noexcept;

 private:
  std::string api_;
  std::string detail_;
  std::string driver_log_;
  std::source_location where_;
  std::runtime_error text_;  // what(): copied without allocating, as an exception's text should be
};

//! Whether `r` is a sticky error (see `cuda_error::sticky`).
bool is_sticky(CUresult r) noexcept;

//! Loader errors: each says what is missing and what to do. All are `cuda_error`s.
//! `libcuda.so.1` (or `$CUASYNC_LIBCUDA`) could not be opened.
class driver_not_found_error : public cuda_error { using cuda_error::cuda_error; };
//! The library that was opened is the toolkit's stub (`CUDA_ERROR_STUB_LIBRARY`), not a real driver.
class stub_library_error : public cuda_error { using cuda_error::cuda_error; };
//! The driver loaded but reports no CUDA device (`CUDA_ERROR_NO_DEVICE`).
class no_device_error : public cuda_error { using cuda_error::cuda_error; };
//! The driver is older than an entry point cuasync needs (`CUDA_ERROR_NOT_SUPPORTED`).
class driver_too_old_error : public cuda_error { using cuda_error::cuda_error; };

namespace detail {
//! Throws `cuda_error` for a failed `CUresult`; `what` names the object the call concerned. The error carries the
//! driver's log lines this thread's failed call `api` produced (cuasync/driver/driver_log.hpp).
[[noreturn]] void throw_cu(CUresult r, const char* api, std::string what, std::source_location where);

//! Throws `cuda_error(CUDA_ERROR_INVALID_VALUE)` for bad input caught before it reaches the GPU. `where` is the
//! caller's call site (no default: a default here would name cuasync's line).
[[noreturn]] void throw_invalid(const char* api, std::string what, std::source_location where);

//! Checks a `CUresult`. Inline so that the success path is one compare. `where`: as for `throw_invalid`.
inline void check(CUresult r, const char* api, std::source_location where) {
  if (r != CUDA_SUCCESS) [[unlikely]] throw_cu(r, api, {}, where);
}

//! The cause of a stored failure, for a message: a cuda_error's `cause()`, another exception's `what()`. Never throws.
std::string cause_of(const std::exception_ptr& failure) noexcept;

//! Hex spelling of a handle for messages (`0x7f12...`).
std::string handle_string(const void* p);
}  // namespace detail
}  // namespace cuasync
