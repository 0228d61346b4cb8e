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

//! Whether the life `life` (a `context_life` answer, not 0) of `ctx` has ended: the driver gives another id, or says
//! the context is gone (destroyed, invalid, or the driver shut down). Any other failure of the query (a transient one,
//! out of memory) is no such word: the life is taken to go on. Never throws.
bool context_life_ended(CUcontext ctx, unsigned long long life) noexcept;

}  // namespace cuasync::detail
