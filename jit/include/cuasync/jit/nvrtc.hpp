// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The NVRTC library as loaded at run time (never linked): the file that `$CUASYNC_LIBNVRTC` names, else
//! `libnvrtc.so.13`, then `libnvrtc.so.12` as the dynamic loader finds them, then the same names in each folder of
//! `$CUASYNC_NVRTC_SEARCH_PATH` (':'-separated; the Python package adds pip's `site-packages/nvidia/*/lib` there).
//! Also finds the CUDA toolkit's include directories, so that JIT-compiled code
//! can `#include <cuda/std/...>`, `<cuda/pipeline>` or `<cuda_fp16.h>`.

#include <cuasync/jit/error.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cuasync::jit {

//! What the loaded NVRTC is and can do.
struct nvrtc_info {
  int major = 0;                     //!< `nvrtcVersion`
  int minor = 0;
  std::vector<int> supported_archs;  //!< `nvrtcGetSupportedArchs`, ascending (75 = sm_75)
  std::string library;               //!< the path that was opened (resolved with `dladdr` when possible)

  //! The version as the CUDA headers spell it: 13000 for 13.0.
  int version() const noexcept { return major * 1000 + minor * 10; }
  //! "13.0"
  std::string version_string() const { return std::to_string(major) + "." + std::to_string(minor); }
  //! True when NVRTC can produce a CUBIN for `sm_<arch>` (`arch` = major * 10 + minor).
  bool supports(int arch) const noexcept;
};

//! Loads NVRTC on first use (thread-safe; the outcome, success or failure, is kept for the process).
//! @throws nvrtc_not_found_error naming the files tried and what to do (install the toolkit's NVRTC or set
//! `CUASYNC_LIBNVRTC`).
const nvrtc_info& nvrtc_library();

//! True once this process has loaded NVRTC (`nvrtc_library()` succeeded). Never loads it. A disk-cache hit whose
//! NVRTC identity came from the cache's `nvrtc-identity` record leaves it false (see `nvrtc_identity.hpp`).
bool nvrtc_loaded() noexcept;

//! The CUDA toolkit's include directories, found at run time: `<root>/include` and `<root>/include/cccl` (CUDA 13
//! keeps CCCL there) for the first root that has `cuda_fp16.h`, trying `$CUDA_HOME`, `$CUDA_PATH`, the toolkit that
//! the loaded NVRTC belongs to, then `/usr/local/cuda`. Empty when none is found. Computed once per process.
const std::vector<std::string>& toolkit_include_dirs();
//! The same for an NVRTC at `nvrtc_library_path` (empty: none), without loading it: what `toolkit_include_dirs()`
//! gives once that library is loaded. Computed once per path and process.
const std::vector<std::string>& toolkit_include_dirs(const std::string& nvrtc_library_path);

namespace detail {
//! The loaded NVRTC's `nvrtc_info`, or nullptr when this process has not loaded it. Never loads it.
const nvrtc_info* loaded_nvrtc_info() noexcept;
//! The folders of `$CUASYNC_NVRTC_SEARCH_PATH` as it is now, in order, empty entries left out.
std::vector<std::string> nvrtc_search_path();
//! The value `$CUASYNC_LIBNVRTC` had when NVRTC was loaded (nothing when unset or empty). Only meaningful once
//! `nvrtc_loaded()`.
std::optional<std::string> libnvrtc_env_at_load();
}  // namespace detail

}  // namespace cuasync::jit
