// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The caching compiler: an in-memory cache of compiled programs (keyed by `cache_key`, which covers the
//! target, so it is per target) in front of the on-disk cache, in front of NVRTC. A memory hit costs one hash of the
//! source and one hash-map lookup (well under 2 µs); a disk hit reads and checks one file; a miss compiles.
//! Concurrent requests for the same key in one process compile once. A disk hit in a fresh process does not load
//! NVRTC when the cache directory's `nvrtc-identity` record says which NVRTC this process would load
//! (`nvrtc_identity.hpp`); every miss loads it, checks that record and keeps it up to date.

#include <cuasync/jit/cache_counts.hpp>
#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/link.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/program.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace cuasync::jit {

class compile_farm;

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
  std::uint64_t memory_misses = 0;  //!< compiles and links not in memory: answered by the disk cache or made
  std::uint64_t compiles = 0;  //!< misses in both caches: NVRTC ran
  std::uint64_t links = 0;     //!< links missed in both caches: nvJitLink ran
  std::uint64_t identity_records = 0;     //!< times this compiler (re)wrote the cache's `nvrtc-identity` file
  std::uint64_t identity_mismatches = 0;  //!< loaded NVRTCs that differed from the recorded identity (then rewritten)
  std::uint64_t preloads = 0;  //!< disk entries `preload` put in the memory cache (counted as disk hits too)
  disk_cache_stats disk;
  //! The lookups' counts as the cache directory's `counts` file keeps them (`processes` 0).
  cache_counts counts() const noexcept {
    return {memory_hits, memory_misses, disk.hits, disk.misses, compiles, links, 0};
  }
};

//! What `compiler::preload` did with a key.
enum class preload_outcome : unsigned char {
  loaded,       //!< read from the disk cache into the memory cache
  in_memory,    //!< already in the memory cache: nothing read
  busy,         //!< another thread of this process is compiling or loading it: left to that thread
  not_on_disk,  //!< no entry (evicted, or the cache is off)
  rejected,     //!< the entry was bad (truncated, corrupt, another key or format): deleted, never loaded
};
const char* to_string(preload_outcome o) noexcept;

//! `compiler::preload`'s answer.
struct preload_result {
  preload_outcome outcome = preload_outcome::not_on_disk;
  compile_result result;  //!< the program when `loaded` or `in_memory` (outcome `disk_hit` or `memory_hit`)
  std::string rejection;  //!< why the entry was rejected, when it was
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
  //! Adds this compiler's hits and misses to its disk cache's `counts` file (`cache_counts.hpp`), when it has both.
  ~compiler();
  compiler(const compiler&) = delete;
  compiler& operator=(const compiler&) = delete;

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

  //! A compile's completion for `compile_async`: the result, or an empty one and the exception.
  using callback = std::function<void(compile_result, std::exception_ptr)>;
  //! As `compile`, completing with `done`. With a farm (`use_farm`): the memory cache, the compiles in flight and the
  //! disk cache are looked up on the calling thread (a hit, or joining another caller's compile of the same key, costs
  //! no thread), and a miss is queued in the farm; `done` runs on the calling thread for a hit, else on the farm's
  //! delivery thread, and this returns at once. Without a farm: compiles on the calling thread, then calls `done`.
  //! An exception `done` throws is dropped. This compiler and its farm must outlive the compile.
  void compile_async(const program& p, const target& t, const compile_options& o, callback done,
                     std::source_location where = std::source_location::current());
  //! The same for a device of compute capability `compute_capability` (see `compile`).
  void compile_async(const program& p, int compute_capability, const compile_options& o, output_request request,
                     callback done, std::source_location where = std::source_location::current());

  //! Sends the misses of `compile` and `compile_async` to `farm`'s worker processes instead of compiling on the
  //! calling thread (the caches stay here: a hit never leaves the process, and a new result is stored by this
  //! process). `farm` must outlive its use by this compiler. Links still run in this process.
  void use_farm(compile_farm& farm) noexcept { farm_.store(&farm, std::memory_order_release); }
  //! Compiles misses in this process again (compiles already sent to a farm finish there).
  void use_farm(std::nullptr_t) noexcept { farm_.store(nullptr, std::memory_order_release); }
  //! The farm in use, or nullptr.
  compile_farm* farm() const noexcept { return farm_.load(std::memory_order_acquire); }

  //! `parts` linked by nvJitLink into one CUBIN for `sm_<arch>` (see `jit::link`): from memory, from disk, or linked
  //! (blocking, tens of ms), keyed by `make_link_key` (the parts' bytes, the options, the name, the nvJitLink).
  //! Concurrent requests for the same link compile once. Loads nvJitLink (its version is part of the key).
  //! @throws as `jit::link`.
  compile_result link(std::span<const link_part> parts, int arch, const link_options& lo = {}, std::string name = {},
                      std::source_location where = std::source_location::current());
  //! Each of `programs` compiled to LTO-IR for a device of compute capability `compute_capability` with `o` and
  //! relocatable device code (so that one part may call a device function another defines), through the caches,
  //! then linked by `link` for `sm_<compute_capability>`: a templated kernel and the user fragments it calls become
  //! one CUBIN. @throws as `compile` and `link`.
  compile_result link_programs(std::span<const program> programs, int compute_capability,
                               const compile_options& o = {}, const link_options& lo = {}, std::string name = {},
                               std::source_location where = std::source_location::current());

  //! Reads `key`'s disk cache entry into the memory cache, so that a later `compile` or `link` of whatever it was made
  //! from is a memory hit: for warm starts, which take the keys from the cache index (`cache_index.hpp`,
  //! `runtime/warm_start.hpp`). Needs neither the program nor NVRTC. Never waits for another thread: a key being
  //! compiled or loaded is left to it (`busy`). Blocking: one file read and checksum. Throws nothing (out of memory
  //! reads as `not_on_disk`).
  preload_result preload(const cache_key& key) noexcept;

  //! The NVRTC identity known without loading NVRTC: the loaded NVRTC's, else the one the disk cache's
  //! `nvrtc-identity` file records for this process; nullptr when neither is known. Never loads NVRTC.
  const nvrtc_info* known_nvrtc_identity() noexcept;
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
  //! This compiler's counts. Each compile's and link's log line says them too (`log.hpp`, at info), and the disk
  //! cache keeps their sums over processes (`read_cache_counts`, shown by `cuasync info`).
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
  using shared_program = std::shared_ptr<const compiled_program>;
  // Told the outcome of another caller's compile of the same key (compile_async joining it).
  using waiter = std::function<void(const shared_program&, std::exception_ptr)>;
  // A key being made: its future (for blocking callers) and the asynchronous callers joining it.
  struct flight {
    std::shared_future<shared_program> future;
    std::vector<waiter> waiters;
  };
  // A key's state for one request: found in memory (or made by another thread, waited for), joined (`async_waiter`
  // was queued: neither field set), or this thread's to make: then `promise` is set, and `publish` or `abandon`
  // must be called.
  struct claim {
    shared_program found;
    std::optional<std::promise<shared_program>> promise;
  };
  claim claim_key(const cache_key& key, waiter* async_waiter = nullptr);
  void publish(const cache_key& key, std::promise<shared_program>& promise, const shared_program& result);
  void abandon(const cache_key& key, std::promise<shared_program>& promise, std::exception_ptr error) noexcept;
  // Gives up the key (no longer in flight) and returns who joined it.
  std::vector<waiter> take_waiters(const cache_key& key);
  // The disk cache's entry, or nullptr.
  shared_program load_from_disk(const cache_key& key);
  // Stores a new result on disk; a failure is counted, not thrown.
  void store_on_disk(const cache_key& key, const compiled_program& result, std::source_location where) noexcept;
  // Before a miss compiles: loads NVRTC and checks it is the one `nvrtc` describes (the key was made for it). When
  // it is not, the target for the loaded one (compile again under its key); else nothing.
  std::optional<target> check_loaded_nvrtc(const nvrtc_info& nvrtc, const target& t, std::optional<retarget> chosen,
                                           std::source_location where);
  // A miss compiled on this thread, or by the farm while this thread waits; stored on disk.
  shared_program compile_miss(const program& p, const target& t, const compile_options& o, const cache_key& key,
                              std::source_location where);
  // The claim on `key` was made for another NVRTC than the one loaded: compile for `again` under its own key and
  // give that result to whoever waits on `key`.
  compile_result compile_again(const program& p, const target& again, const compile_options& o, const cache_key& key,
                               std::promise<shared_program>& promise, std::optional<retarget> chosen,
                               std::source_location where);
  void async_with(compile_farm& farm, const program& p, const target& t, const compile_options& o,
                  const nvrtc_info& nvrtc, std::optional<retarget> chosen, const std::shared_ptr<callback>& done,
                  std::source_location where);
  // Records the loaded NVRTC's identity in the disk cache, once per compiler; failures are ignored.
  void record_identity() noexcept;

  std::optional<disk_cache> disk_;
  std::once_flag recorded_once_, record_once_;
  std::optional<nvrtc_info> recorded_;          // the identity read from the disk cache, when usable
  std::atomic<const nvrtc_info*> identity_{nullptr};
  std::atomic<std::uint64_t> identity_records_{0}, identity_mismatches_{0}, preloads_{0};
  mutable std::shared_mutex mutex_;
  std::unordered_map<cache_key, std::shared_ptr<const compiled_program>, cache_key_hash> memory_;
  std::unordered_map<cache_key, flight, cache_key_hash> in_flight_;
  std::atomic<compile_farm*> farm_{nullptr};
  std::atomic<std::uint64_t> memory_hits_{0}, memory_misses_{0}, compiles_{0}, links_{0};
  std::once_flag pch_once_;
  std::string pch_dir_;
};

//! The process's compiler, configured from the environment on first use (`disk_cache_settings::from_environment`),
//! with a compile farm when `CUASYNC_JIT_FARM` asks for one (`farm_options::from_environment`).
//! @throws cache_error when the configured cache directory is refused; cuda_error for a bad `CUASYNC_JIT_FARM`.
compiler& default_compiler(std::source_location where = std::source_location::current());

}  // namespace cuasync::jit
