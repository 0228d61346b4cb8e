// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Internal: what a layer above the driver settles before cuasync releases a primary context it retained. The
//! engine's event pool stops its background work for the context there: a slab of host words that the grower zeroed
//! while the release freed it was a write into freed memory.

#include <cuda.h>

namespace cuasync::detail {

using context_release_hook = void (*)(CUcontext ctx) noexcept;

//! Sets the one hook (the engine's, at its load). Never throws.
void set_context_release_hook(context_release_hook hook) noexcept;
//! Runs the hook, if any, for `ctx` (alive, about to be released). Never throws.
void run_context_release_hook(CUcontext ctx) noexcept;

}  // namespace cuasync::detail
