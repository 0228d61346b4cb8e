// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The disk cache's index: what a warm start reads to load every entry without the programs they were made from and
//! without NVRTC (`runtime/warm_start.hpp`). Each store appends one record for its entry: the key, the target, the
//! NVRTC version that made it, the entry's size and the program's (or link's) name. The key is what a later
//! `compiler::compile` of the same program computes (a hash of the program text and the NVRTC identity), so an entry
//! loaded into the memory cache by its key turns that compile into a memory hit.
//!
//! The file (`<cache>/index`) is text: a header line `cuasync cache-index 1`, then one record per line,
//!
//!     <key: 32 hex> <cubin|ptx|ltoir> <arch> <nvrtc version> <entry bytes> <name, %-escaped> <check: 16 hex>
//!
//! where the check is XXH3 over the rest of the line, so a torn or corrupt line is skipped alone. Appends are one
//! `write` under an exclusive `flock`; a rewrite (`compact_cache_index`) writes a temporary file and renames it over the
//! index under the same lock, and an appender that finds the file renamed under it appends again to the new one.
//! The index only says where to look: a record whose entry was evicted is stale (skipped), and an entry is checked
//! (checksum, key) when it is loaded, as any disk hit is. Entries written before the index existed are not in it; they
//! are still found by a compile of their program.

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/target.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cuasync::jit {

//! The index's file name in the cache directory.
inline constexpr const char* cache_index_file_name = "index";

//! One record.
struct cache_index_record {
  cache_key key;
  jit::target target;
  int nvrtc_version = 0;       //!< the NVRTC (or nvJitLink) that made the entry, e.g. 13000
  std::uint64_t bytes = 0;     //!< the entry file's size
  std::string name;            //!< the program's or the link's name
  friend bool operator==(const cache_index_record&, const cache_index_record&) = default;
};

//! What `read_cache_index` found.
struct cache_index_contents {
  std::vector<cache_index_record> records;  //!< one per key (the latest record of a key wins), in file order
  std::size_t lines = 0;                    //!< record lines read (the header not counted)
  std::size_t bad_lines = 0;                //!< lines that did not parse or whose check failed: skipped
  std::size_t duplicates = 0;               //!< records superseded by a later one of the same key
};

//! The index of `cache_dir` (empty when there is none). Reads under a shared `flock`. A file with another header
//! (a newer format, or a corrupt first line) counts every line as bad. Throws nothing.
cache_index_contents read_cache_index(const std::filesystem::path& cache_dir) noexcept;

//! Appends `record` to the index of `cache_dir` (creating it, mode 0600, with its header).
//! @throws cache_error when the index cannot be opened or written.
void append_cache_index(const std::filesystem::path& cache_dir, const cache_index_record& record,
                        std::source_location where = std::source_location::current());

//! Rewrites the index of `cache_dir` with its good records only: no bad lines, no duplicates, and no record whose
//! entry file is gone (checked under the lock, so an entry stored meanwhile keeps its record). Returns the number of
//! lines removed. @throws cache_error when it cannot be rewritten (the old index is then left as it was).
std::size_t compact_cache_index(const std::filesystem::path& cache_dir,
                                std::source_location where = std::source_location::current());

namespace detail {
//! A record's line (with its check and the newline), and a line parsed back (false for a bad one).
std::string format_index_line(const cache_index_record& r);
bool parse_index_line(std::string_view line, cache_index_record& out);
}  // namespace detail

}  // namespace cuasync::jit
