// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Internal: which life of a context a handle names now.

#include <cuasync/driver/detail/driver_api.hpp>

namespace cuasync::detail {

//! The id (`cuCtxGetId`) of the life `ctx` is in now; 0 when it cannot be read (the context is gone, or no driver is
//! loaded). A primary context keeps its handle when it is released and retained again, and a later context can reuse
//! a handle: the id tells the lives apart. Never throws.
unsigned long long context_life(CUcontext ctx) noexcept;

}  // namespace cuasync::detail
