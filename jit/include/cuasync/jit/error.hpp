// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Errors of the jit layer. Every one is a `cuasync::cuda_error` (one exception family); NVRTC results travel
//! in their own `std::error_category`, so they can also be carried by asynchronous completions.

#include <cuasync/driver/error.hpp>

#include <nvrtc.h>

#include <string>
#include <vector>

namespace cuasync {

//! The `std::error_category` of `nvrtcResult` values ("nvrtc"): names come from the loaded NVRTC
//! (`nvrtcGetErrorString`), or from a built-in table when none is loaded.
const std::error_category& nvrtc_category() noexcept;

//! A `std::error_code` in `nvrtc_category()`.
inline std::error_code make_error_code(nvrtcResult r) noexcept { return {static_cast<int>(r), nvrtc_category()}; }

namespace jit {

//! NVRTC (`libnvrtc.so.13`, `.12`, or `$CUASYNC_LIBNVRTC`) could not be opened or lacks an entry point.
class nvrtc_not_found_error : public cuda_error { using cuda_error::cuda_error; };

//! The device is older than every architecture the loaded NVRTC can compile for.
class unsupported_architecture_error : public cuda_error { using cuda_error::cuda_error; };

//! A PTX image uses a newer PTX ISA than the installed driver can JIT (it would fail with
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`); the message says which versions and what to do.
class ptx_too_new_error : public cuda_error { using cuda_error::cuda_error; };

//! The on-disk cache cannot be used as configured: its directory is owned by another user, is writable by group
//! or others, or cannot be created. The code is a `std::errc` value.
class cache_error : public cuda_error { using cuda_error::cuda_error; };

//! A failed compile (`NVRTC_ERROR_COMPILATION`, or an invalid option or name expression). `what()` names the program
//! and quotes the first error with the offending source line; `log()` holds NVRTC's whole log.
class compile_error : public cuda_error {
 public:
  compile_error(nvrtcResult result, std::string program_name, std::vector<std::string> options, std::string log,
                std::string first_error, std::source_location where = std::source_location::current());

  //! The program's name (what NVRTC prints in front of line numbers).
  const std::string& program_name() const noexcept { return program_name_; }
  //! The options NVRTC was given.
  const std::vector<std::string>& options() const noexcept { return options_; }
  //! NVRTC's whole compile log.
  const std::string& log() const noexcept { return log_; }
  //! The first error, followed by the offending source line when it could be found.
  const std::string& first_error() const noexcept { return first_error_; }

 private:
  std::string program_name_;
  std::vector<std::string> options_;
  std::string log_;
  std::string first_error_;
};

namespace detail {
//! Throws `cuda_error` in `nvrtc_category()` for a failed NVRTC call; `what` names the program. `where` is the
//! caller's call site, as for `cuasync::detail::throw_invalid`.
[[noreturn]] void throw_nvrtc(nvrtcResult r, const char* api, std::string what, std::source_location where);
//! Checks an `nvrtcResult`.
inline void check_nvrtc(nvrtcResult r, const char* api, const std::string& program, std::source_location where) {
  if (r != NVRTC_SUCCESS) [[unlikely]] throw_nvrtc(r, api, "program '" + program + "'", where);
}
}  // namespace detail

}  // namespace jit
}  // namespace cuasync
