// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The NVRTC entry points, resolved once with `dlsym` from the library that `nvrtc_library()` opened.

#include <nvrtc.h>

#include <atomic>

namespace cuasync::jit::detail {

// Entry points every supported NVRTC (12.0 and newer) provides.
#define CUASYNC_NVRTC_ENTRY_POINTS(X)                                                                          \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)                  \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetPTXSize) X(nvrtcGetPTX)          \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetLTOIRSize) X(nvrtcGetLTOIR) X(nvrtcGetProgramLogSize)          \
  X(nvrtcGetProgramLog) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName)

//! Every entry point, resolved. Obtained from `nvrtc()`.
struct nvrtc_entry_points {
#define CUASYNC_DECLARE_NVRTC_ENTRY(name) decltype(&::name) name = nullptr;
  CUASYNC_NVRTC_ENTRY_POINTS(CUASYNC_DECLARE_NVRTC_ENTRY)
#undef CUASYNC_DECLARE_NVRTC_ENTRY
};

//! Loads NVRTC (thread-safe, once per process; a failure is remembered and thrown again).
const nvrtc_entry_points& load_nvrtc();
extern std::atomic<const nvrtc_entry_points*> loaded_nvrtc;

//! The entry points; loads NVRTC on first use. After that, one atomic load. @throws nvrtc_not_found_error
inline const nvrtc_entry_points& nvrtc() {
  if (auto* p = loaded_nvrtc.load(std::memory_order_acquire)) [[likely]] return *p;
  return load_nvrtc();
}

//! The entry points if NVRTC is already loaded, else nullptr. Never loads; never throws.
inline const nvrtc_entry_points* nvrtc_if_loaded() noexcept { return loaded_nvrtc.load(std::memory_order_acquire); }

}  // namespace cuasync::jit::detail
