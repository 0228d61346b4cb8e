// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The on-disk cache of compiled programs, shared by processes. An entry never lies:
//! - one file per key (`<key>.jit`) with a header (magic, format version, key, size) and an XXH3-128 checksum over
//!   header and payload; a truncated, corrupt, mismatched or older-format entry is detected, deleted and reported as
//!   a miss (the caller recompiles), never loaded;
//! - writes go to a temporary file in the same directory, which is then renamed into place, so a concurrent reader
//!   sees the old entry or the whole new one, never half of one;
//! - the directory is created 0700; one owned by another user, or writable by group or others, is refused;
//! - the total size is capped: after each store the least recently used entries (by modification time, which a hit
//!   refreshes) are evicted;
//! - each store appends a record to the directory's index (`cache_index.hpp`), which a warm start reads to load every
//!   entry without the programs and without NVRTC (`runtime/warm_start.hpp`).

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/program.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace cuasync::jit {

//! Where and whether to cache on disk.
struct disk_cache_settings {
  bool enabled = true;
  std::filesystem::path directory;
  std::uint64_t max_bytes = std::uint64_t{1} << 30;  //!< 1 GiB

  //! From the environment: `CUASYNC_CACHE=0` (or off/false/no) disables the disk cache; `CUASYNC_CACHE_DIR`
  //! relocates it (default `$XDG_CACHE_HOME/cuasync/jit`, else `$HOME/.cache/cuasync/jit`, else
  //! `/tmp/cuasync-<uid>/jit`); `CUASYNC_CACHE_SIZE` caps it (bytes, or with a K, M or G suffix).
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for an unreadable `CUASYNC_CACHE_SIZE`.
  static disk_cache_settings from_environment(std::source_location where = std::source_location::current());
};

//! Counters; each is monotonic for the life of the cache object.
struct disk_cache_stats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;          //!< lookups that found no usable entry (including rejected ones)
  std::uint64_t rejected = 0;        //!< entries found truncated, corrupt, mismatched or of another format; deleted
  std::uint64_t stores = 0;
  std::uint64_t store_failures = 0;  //!< stores that could not be written (the compile still succeeded)
  std::uint64_t evictions = 0;       //!< entries removed to respect the size cap
  std::uint64_t index_failures = 0;  //!< stores whose index record could not be appended (the entry is still there)
};

//! An on-disk cache directory. Thread-safe; any number of processes may share the directory.
class disk_cache {
 public:
  //! Opens `directory`, creating it (mode 0700) and its parents when missing.
  //! @throws cache_error when it is owned by another user, writable by group or others, not a directory, or cannot
  //! be created; each message says what to do.
  explicit disk_cache(std::filesystem::path directory, std::uint64_t max_bytes = std::uint64_t{1} << 30,
                      std::source_location where = std::source_location::current());

  //! The entry for `key`, or nothing. A bad entry is deleted, counted in `rejected`, and its reason kept in
  //! `last_rejection()`. A hit refreshes the entry's modification time (its LRU position). Never throws for a bad
  //! entry; throws nothing at all.
  std::optional<compiled_program> load(const cache_key& key) noexcept { return load(key, nullptr); }
  //! The same; when the entry was there but bad, `*rejection` (when given) says why; otherwise it is left empty.
  std::optional<compiled_program> load(const cache_key& key, std::string* rejection) noexcept;

  //! Writes the entry for `key` (temporary file + rename) and appends its record to the index, then evicts least
  //! recently used entries until the directory is within `max_bytes()` (the entry just written is kept even if it
  //! alone is larger). An index record that cannot be appended is counted in `index_failures`, not thrown.
  //! @throws cache_error when the entry cannot be written (disk full, permissions); the directory is left clean.
  void store(const cache_key& key, const compiled_program& program,
             std::source_location where = std::source_location::current());

  //! Removes least recently used entries until the total size is at most `bytes`; also removes temporary files
  //! left for over 10 minutes by crashed writers. Returns the number of entries removed.
  std::size_t evict_to(std::uint64_t bytes, const std::filesystem::path& keep = {});

  //! The total size of the entries now in the directory.
  std::uint64_t size_bytes() const;

  const std::filesystem::path& directory() const noexcept { return directory_; }
  //! The path of `key`'s entry.
  std::filesystem::path entry_path(const cache_key& key) const;
  //! The directory for NVRTC's precompiled headers (`<directory>/pch`, created 0700 on first use).
  std::filesystem::path pch_directory(std::source_location where = std::source_location::current()) const;
  std::uint64_t max_bytes() const noexcept { return max_bytes_; }
  disk_cache_stats stats() const noexcept;
  //! Why the most recent bad entry was rejected ("truncated: ...", "checksum mismatch", "format version 0, ...").
  std::string last_rejection() const;

  //! The entry file's bytes for `key` and `program` (what `store` writes). Exposed for tests and tools.
  static std::string serialize(const cache_key& key, const compiled_program& program,
                               std::uint32_t format_version = cache_format_version);

 private:
  void reject(const std::filesystem::path& path, const void* identity, std::string why) noexcept;

  std::filesystem::path directory_;
  std::uint64_t max_bytes_;
  struct counters {
    std::atomic<std::uint64_t> hits{0}, misses{0}, rejected{0}, stores{0}, store_failures{0}, evictions{0},
        index_failures{0};
  } counters_;
  mutable std::mutex mutex_;  // guards last_rejection_
  std::string last_rejection_;
};

namespace detail {
//! Creates `dir` (0700; parents as needed) when missing and checks that it is a directory owned by this user and not
//! writable by group or others. `what` names it in messages ("cache directory"). @throws cache_error
void secure_directory(const std::filesystem::path& dir, const char* what,
                      std::source_location where = std::source_location::current());
//! Writes `bytes` to a new hidden temporary file next to `final_path` (mode 0600, named so that `evict_to` removes it
//! when a crash leaves it), then renames it to `final_path`: a reader sees the old file or the whole new one.
//! `what` names the file in messages ("the cache entry"). @throws cache_error; the temporary file is removed.
void write_file_atomically(const std::filesystem::path& final_path, std::string_view bytes, const char* what,
                           std::source_location where);
//! Reads `size` bytes from `fd` (retrying when interrupted); fewer when the file ends first or a read fails.
std::string read_up_to(int fd, std::size_t size);
//! A cache size as `$CUASYNC_CACHE_SIZE` gives it ("1048576", "512M", "2G"). @throws cuda_error naming the text
std::uint64_t parse_cache_size(const std::string& text, std::source_location where);
//! An entry file's bytes (as `disk_cache::serialize` writes them) decoded for `key`: every field checked (header,
//! key, checksum, then the payload); nullopt with `why` set when anything is wrong. For `disk_cache::load` and fuzzing.
std::optional<compiled_program> decode_entry(std::string bytes, const cache_key& key, std::string& why);
//! The payload part alone (after the header and its checksum were checked).
std::optional<compiled_program> decode_payload(std::string_view payload, std::string& why);
}  // namespace detail

}  // namespace cuasync::jit
