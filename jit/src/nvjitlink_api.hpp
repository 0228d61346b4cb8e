// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The nvJitLink entry points cuasync uses, resolved once with dlsym from the library nvjitlink_library() opened.
// nvJitLink.h is included for its types only: its inline functions call the versioned symbols (__nvJitLinkCreate_13_0)
// of the toolkit the build saw, while the unversioned names resolved here are exported by every nvJitLink 12 and 13.
#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>

#include <cstddef>
#include <cstdint>

namespace cuasync::jit::detail {

// Entry points every supported nvJitLink provides (nvJitLinkVersion is fetched apart: 12.3 and newer only).
#define CUASYNC_NVJITLINK_ENTRY_POINTS(X)                                                                   \
  X(nvJitLinkCreate, nvJitLinkHandle*, std::uint32_t, const char**)                                          \
  X(nvJitLinkDestroy, nvJitLinkHandle*)                                                                      \
  X(nvJitLinkAddData, nvJitLinkHandle, nvJitLinkInputType, const void*, std::size_t, const char*)           \
  X(nvJitLinkComplete, nvJitLinkHandle)                                                                      \
  X(nvJitLinkGetLinkedCubinSize, nvJitLinkHandle, std::size_t*)                                              \
  X(nvJitLinkGetLinkedCubin, nvJitLinkHandle, void*)                                                         \
  X(nvJitLinkGetErrorLogSize, nvJitLinkHandle, std::size_t*)                                                 \
  X(nvJitLinkGetErrorLog, nvJitLinkHandle, char*)                                                            \
  X(nvJitLinkGetInfoLogSize, nvJitLinkHandle, std::size_t*)                                                  \
  X(nvJitLinkGetInfoLog, nvJitLinkHandle, char*)

//! Every entry point, resolved. Obtained from `nvjitlink()`.
struct nvjitlink_entry_points {
#define CUASYNC_DECLARE_NVJITLINK_ENTRY(name, ...) nvJitLinkResult (*name)(__VA_ARGS__) = nullptr;
  CUASYNC_NVJITLINK_ENTRY_POINTS(CUASYNC_DECLARE_NVJITLINK_ENTRY)
#undef CUASYNC_DECLARE_NVJITLINK_ENTRY
  nvJitLinkResult (*nvJitLinkVersion)(unsigned*, unsigned*) = nullptr;  // null before 12.3
};

//! Loads nvJitLink (thread-safe, once per process; a failure is remembered and thrown again).
//! @throws nvjitlink_not_found_error
const nvjitlink_entry_points& nvjitlink();

}  // namespace cuasync::jit::detail
