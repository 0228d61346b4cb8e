// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the thread where runtime/ allocates pinned memory ahead of the copies that need it (the staging ring,
// pinned pool misses of asynchronous callers). `cuMemHostAlloc` costs ~0.7 ms per MiB the first time (a 50 ms stall
// of the io thread at the first awaited pageable copy on the H200): no thread that awaits makes it.
#include <cuasync/driver/detail/serial_worker.hpp>

namespace cuasync::runtime {

inline cuasync::detail::serial_worker& grower_thread() {
  static cuasync::detail::serial_worker& w = cuasync::detail::serial_worker::make("cuasync-grower");
  return w;
}

}  // namespace cuasync::runtime
