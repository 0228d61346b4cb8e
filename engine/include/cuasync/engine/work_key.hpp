// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The work keys front-ends give their waits (`wait_target::work_key`): what an operation is, so that the
//! engine can predict how long the next one of the same shape takes (engine/duration_predictor.hpp). Arguments are
//! not part of a key (a kernel whose duration depends on them is learnt afresh when it changes: the estimate is
//! reset when an observation shows it wrong).

#include <cuasync/driver/launch.hpp>
#include <cuasync/engine/duration_predictor.hpp>

#include <cstddef>
#include <cstdint>

namespace cuasync {

//! A launch: the function, its grid, block and dynamic shared memory.
inline std::uint64_t launch_work_key(const void* function, const launch_config& c) noexcept {
  std::uint64_t h = mix_work_key(0x6c61756e6368ULL, reinterpret_cast<std::uintptr_t>(function));
  h = mix_work_key(h, (std::uint64_t{c.grid.x} << 32) | c.grid.y);
  h = mix_work_key(h, (std::uint64_t{c.grid.z} << 32) | c.block.x);
  h = mix_work_key(h, (std::uint64_t{c.block.y} << 32) | c.block.z);
  return mix_work_key(h, c.shared_memory_bytes);
}

//! A copy of `bytes` in direction `kind` (any small number telling the directions and memory kinds apart).
inline std::uint64_t copy_work_key(unsigned kind, std::size_t bytes) noexcept {
  return mix_work_key(mix_work_key(0x636f7079ULL, kind), bytes);
}

//! A memset of `bytes` (`element`: the element size, 1, 2 or 4).
inline std::uint64_t memset_work_key(unsigned element, std::size_t bytes) noexcept {
  return mix_work_key(mix_work_key(0x6d656d736574ULL, element), bytes);
}

//! A replay of an instantiated graph (its `CUgraphExec`; node updates between replays are not part of it).
inline std::uint64_t graph_work_key(const void* exec) noexcept {
  return mix_work_key(0x6772617068ULL, reinterpret_cast<std::uintptr_t>(exec));
}

}  // namespace cuasync
