// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! What the driver knows about a pointer: pinned or pageable host memory, device or managed memory. Later
//! layers use it to diagnose pageable memory passed to an asynchronous copy.

#include <cuasync/driver/error.hpp>

namespace cuasync {

enum class memory_kind {
  pageable_host,  //!< ordinary host memory: asynchronous copies from it are staged and synchronous
  pinned_host,    //!< cuMemHostAlloc or registered memory
  device,         //!< device memory
  managed,        //!< cuMemAllocManaged
};

//! Classifies `p`. Never throws for an unknown pointer (that is pageable host memory). @throws the loader errors.
memory_kind classify_pointer(const void* p);
//! True when `p` is page-locked (allocated pinned or registered) host memory.
inline bool is_pinned(const void* p) { return classify_pointer(p) == memory_kind::pinned_host; }

}  // namespace cuasync
