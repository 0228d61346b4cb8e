// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! nvJitLink, the CUDA run-time linker, as loaded at run time (never linked): the file that `$CUASYNC_LIBNVJITLINK`
//! names, else `libnvJitLink.so.13`, then `libnvJitLink.so.12` as the dynamic loader finds them, then the same names
//! in each folder of `$CUASYNC_NVRTC_SEARCH_PATH` (where the Python package puts pip's `site-packages/nvidia/*/lib`
//! folders: `nvidia-nvjitlink` installs there). It links LTO-IR, PTX and CUBIN parts into one CUBIN (`link.hpp`).

#include <cuasync/jit/error.hpp>

#include <string>
#include <system_error>

namespace cuasync {

//! The `std::error_category` of `nvJitLinkResult` values ("nvjitlink"), named from a built-in table.
const std::error_category& nvjitlink_category() noexcept;

namespace jit {

//! nvJitLink could not be opened (`libnvJitLink.so.13`, `.12`, or `$CUASYNC_LIBNVJITLINK`) or lacks an entry point.
//! Its message lists every file tried and what to install.
class nvjitlink_not_found_error : public cuda_error { using cuda_error::cuda_error; };

//! What the loaded nvJitLink is.
struct nvjitlink_info {
  unsigned major = 0;   //!< `nvJitLinkVersion` (0 when the library is older than 12.3 and cannot say)
  unsigned minor = 0;
  std::string library;  //!< the path that was opened (resolved with `dladdr` when possible)
  //! The version as the CUDA headers spell it: 13000 for 13.0.
  int version() const noexcept { return static_cast<int>(major * 1000 + minor * 10); }
  //! "13.0" ("unknown" when the library cannot say).
  std::string version_string() const {
    return major ? std::to_string(major) + "." + std::to_string(minor) : std::string("unknown");
  }
};

//! Loads nvJitLink on first use (thread-safe; the outcome, success or failure, is kept for the process).
//! @throws nvjitlink_not_found_error naming the files tried and what to do.
const nvjitlink_info& nvjitlink_library();

//! True once this process has loaded nvJitLink. Never loads it.
bool nvjitlink_loaded() noexcept;

}  // namespace jit
}  // namespace cuasync
