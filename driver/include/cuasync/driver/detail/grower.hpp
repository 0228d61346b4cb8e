// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Internal: the thread where cuasync allocates pinned memory ahead of the work that needs it (the runtime's staging
//! ring, pinned pool misses of asynchronous callers, the event pools' host words). `cuMemHostAlloc` costs ~0.7 ms per
//! MiB the first time (a 50 ms stall of the io thread at the first awaited pageable copy on the H200), and waits
//! behind any other thread's: no thread that awaits makes it.
#include <cuasync/driver/detail/serial_worker.hpp>

namespace cuasync::detail {

inline serial_worker& grower_thread() {
  static serial_worker& w = serial_worker::make("cuasync-grower");
  return w;
}

}  // namespace cuasync::detail
