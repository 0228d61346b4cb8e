// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The JIT caches' hit and miss counts summed over every process that used a cache directory, so that a hit rate can
//! be read after the fact (`cuasync info`): each `compiler` adds its own counts to the directory's `counts` file when
//! it is destroyed (the process's `default_compiler` at exit). The file is a few lines of text ("memory_hits 12"),
//! updated under an exclusive `flock`, so processes ending at once all count; one that does not end normally (a
//! crash, `_exit`) adds nothing. A file that does not parse is started again from zero.

#include <cstdint>
#include <filesystem>
#include <string>

namespace cuasync::jit {

//! The file's name in the cache directory.
inline constexpr const char* cache_counts_file_name = "counts";

//! Lookups and their outcomes, as `compiler_stats` counts them.
struct cache_counts {
  std::uint64_t memory_hits = 0;
  std::uint64_t memory_misses = 0;  //!< answered by the disk cache or by NVRTC
  std::uint64_t disk_hits = 0;
  std::uint64_t disk_misses = 0;    //!< including entries rejected as bad
  std::uint64_t compiles = 0;       //!< NVRTC ran
  std::uint64_t links = 0;          //!< nvJitLink ran
  std::uint64_t processes = 0;      //!< compilers (processes, usually) whose counts were added

  //! The share of lookups answered from memory, or from disk among those memory missed: 0 when there were none.
  double memory_hit_rate() const noexcept;
  double disk_hit_rate() const noexcept;
  cache_counts& operator+=(const cache_counts& o) noexcept;
  bool empty() const noexcept { return memory_hits + memory_misses + disk_hits + disk_misses + links == 0; }
  //! "memory 12 hits / 3 misses (80.0%), disk 2 hits / 1 miss (66.7%), 1 compile, 0 links"
  std::string describe() const;
};

//! The counts recorded in `cache_dir` (zeros when there is no file, or one that does not parse). Never throws.
cache_counts read_cache_counts(const std::filesystem::path& cache_dir) noexcept;

//! Adds `c` (and one process) to the counts recorded in `cache_dir`. Returns false when the file could not be
//! written (the counts are a convenience: nothing else depends on them). Never throws.
bool add_cache_counts(const std::filesystem::path& cache_dir, const cache_counts& c) noexcept;

}  // namespace cuasync::jit
