#pragma once
//! @file The caching compiler: an in-memory cache of compiled programs (keyed by `cache_key`, which covers the
//! target, so it is per target) in front of the on-disk cache, in front of NVRTC. A memory hit costs one hash of the
//! source and one hash-map lookup (well under 2 µs); a disk hit reads and checks one file; a miss compiles.
//! Concurrent requests for the same key in one process compile once. A disk hit in a fresh process does not load
//! NVRTC when the cache directory's `nvrtc-identity` record says which NVRTC this process would load
//! (`nvrtc_identity.hpp`); every miss loads it, checks that record and keeps it up to date.

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/program.hpp>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace cuasync::jit {

//! Where a result came from.
enum class cache_outcome : unsigned char { memory_hit, disk_hit, miss };
const char* to_string(cache_outcome o) noexcept;

//! A compile's result, shared: the compiler's memory cache keeps it too.
struct compile_result {
  std::shared_ptr<const compiled_program> program;
  cache_outcome outcome = cache_outcome::miss;
  cache_key key;
  const compiled_program& operator*() const noexcept { return *program; }
  const compiled_program* operator->() const noexcept { return program.get(); }
};

//! Counters of the memory cache, with the disk cache's (zero when it is off).
struct compiler_stats {
  std::uint64_t memory_hits = 0;
  std::uint64_t compiles = 0;  //!< misses in both caches: NVRTC ran
  std::uint64_t identity_records = 0;     //!< times this compiler (re)wrote the cache's `nvrtc-identity` file
  std::uint64_t identity_mismatches = 0;  //!< loaded NVRTCs that differed from the recorded identity (then rewritten)
  disk_cache_stats disk;
};

//! Compiles through the caches. Thread-safe.
class compiler {
 public:
  //! With the disk cache `settings` describes (none when `!settings.enabled`); by default
  //! `disk_cache_settings::from_environment()`'s.
  //! @throws cache_error when the cache directory is refused (see `disk_cache`).
  explicit compiler(const disk_cache_settings& settings, std::source_location where = std::source_location::current());
  explicit compiler(std::source_location where = std::source_location::current())
      : compiler(disk_cache_settings::from_environment(where), where) {}

  //! `p` compiled for `t` with `o`: from memory, from disk, or by NVRTC (blocking), in that order. A new result is
  //! kept in memory and written to disk (a failed write is counted in `stats().disk.store_failures`, not thrown).
  //! @throws compile_error, nvrtc_not_found_error, cuda_error for bad options.
  compile_result compile(const program& p, const target& t, const compile_options& o = {},
                         std::source_location where = std::source_location::current());
  //! For a device of compute capability `compute_capability` (major * 10 + minor): `select_target` picks the target.
  //! @throws as above, and unsupported_architecture_error.
  compile_result compile(const program& p, int compute_capability, const compile_options& o = {},
                         output_request request = output_request::automatic,
                         std::source_location where = std::source_location::current());

  //! The NVRTC that keys and targets are computed for. Once this process has loaded NVRTC: the loaded one. Before:
  //! the identity the disk cache's `nvrtc-identity` file records for this process (`recorded_nvrtc_identity`), so
  //! that a disk hit needs no NVRTC; with no usable record, or no disk cache, NVRTC is loaded (and, with a disk
  //! cache, its identity recorded). @throws nvrtc_not_found_error
  const nvrtc_info& nvrtc_identity();
  //! `jit::select_target` for a device of compute capability `compute_capability` with `nvrtc_identity()`'s
  //! architectures: needs no NVRTC when the identity is recorded. @throws as `select_target`.
  target target_for(int compute_capability, output_request request = output_request::automatic,
                    std::source_location where = std::source_location::current());

  //! The disk cache, or nullptr when it is off.
  disk_cache* disk() noexcept { return disk_ ? &*disk_ : nullptr; }
  //! Where precompiled headers go: the disk cache's `pch` directory, else `/tmp/cuasync-<uid>-pch` (0700).
  const std::string& pch_directory(std::source_location where = std::source_location::current());
  compiler_stats stats() const noexcept;
  //! Forgets the in-memory results (the disk cache stays).
  void clear_memory();

 private:
  struct retarget {  // how the target was chosen, to choose again for another NVRTC
    int compute_capability;
    output_request request;
  };
  compile_result compile_with(const program& p, const target& t, const compile_options& o, const nvrtc_info& nvrtc,
                              std::optional<retarget> chosen, std::source_location where);
  // Records the loaded NVRTC's identity in the disk cache, once per compiler; failures are ignored.
  void record_identity() noexcept;

  std::optional<disk_cache> disk_;
  std::once_flag recorded_once_, record_once_;
  std::optional<nvrtc_info> recorded_;          // the identity read from the disk cache, when usable
  std::atomic<const nvrtc_info*> identity_{nullptr};
  std::atomic<std::uint64_t> identity_records_{0}, identity_mismatches_{0};
  mutable std::shared_mutex mutex_;
  std::unordered_map<cache_key, std::shared_ptr<const compiled_program>, cache_key_hash> memory_;
  std::unordered_map<cache_key, std::shared_future<std::shared_ptr<const compiled_program>>, cache_key_hash>
      in_flight_;
  std::atomic<std::uint64_t> memory_hits_{0}, compiles_{0};
  std::once_flag pch_once_;
  std::string pch_dir_;
};

//! The process's compiler, configured from the environment on first use (`disk_cache_settings::from_environment`).
//! @throws cache_error when the configured cache directory is refused.
compiler& default_compiler(std::source_location where = std::source_location::current());

}  // namespace cuasync::jit
