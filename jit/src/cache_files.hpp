// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to jit/: the cache files' clock (disk_cache.cpp ages entries by it; cache_files.cpp stamps them).
#include <ctime>

namespace cuasync::jit::detail {

timespec now_realtime() noexcept;
//! Sets the modification time (the LRU position) precisely: file systems stamp writes with a coarse clock.
void touch(int fd) noexcept;

}  // namespace cuasync::jit::detail
