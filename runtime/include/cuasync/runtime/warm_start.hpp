// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Warm start: every kernel a process's disk cache holds for a device, loaded on background threads while the
//! process does its other start-up work, without NVRTC and without the programs. A `warm_start` reads the cache
//! index (`jit/cache_index.hpp`), keeps the records for the device (a CUBIN for its architecture, the PTX and LTO-IR
//! targets a compile for it would choose), for the NVRTC version the cache's `nvrtc-identity` record names, and
//! whose name starts with `warm_start_options::name_prefix`; then, on `threads` threads, reads each entry into the
//! compiler's memory cache (`jit::compiler::preload`: the entry's checksum and key checked, as any disk hit's) and
//! loads each CUBIN or PTX as the kernel cache's context-independent library (`kernel_cache::load_library`).
//! Afterwards, `kernel_cache::shared_kernel` for one of those kernels is a compiler memory hit and a library hit (one
//! `cuKernelGetFunction` per context on first use), and `compile` (or `kernel_cache::kernel`, which then loads only its
//! module) is a memory hit. A lookup of a kernel the warm start has not reached yet is served as without it (a disk
//! hit on the caller's thread), never waits for the warm start, and is never loaded twice.
//!
//! Nothing bad is loaded: a record whose entry was evicted is stale, an entry that fails its checks is deleted
//! (`disk_cache`), an entry that disagrees with its record, a PTX too new for the driver and an image the driver
//! refuses are not loaded as libraries; each is counted and named in the report. When most of the index's lines are
//! stale, bad or superseded, the warm start rewrites it (`jit::compact_cache_index`).

#include <cuasync/driver/context.hpp>
#include <cuasync/runtime/kernel_cache.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cuasync::runtime {

//! What a warm start loads, and how.
struct warm_start_options {
  //! Only entries whose program (or link) name starts with this: a framework's own kernels. Empty: every entry.
  std::string name_prefix;
  //! Loading threads (each reads entries and loads libraries); at least 1.
  unsigned threads = 4;
  //! Also load each CUBIN and PTX entry as a library (`cuLibraryLoadData`). False: the compiler's memory cache only.
  bool load_libraries = true;
  //! PTX entries too: the driver JIT-compiles each when it is loaded (up to ~100 ms). False: CUBIN and LTO-IR only.
  bool include_ptx = true;
  //! When set: each loaded library's name-expression kernels are also resolved in this context
  //! (`cuKernelGetFunction`), so their first `shared_kernel` there costs no driver call.
  context_ref functions_in;
  //! Rewrite the index when most of its lines are stale, bad or superseded (and at least 64 are).
  bool compact_index = true;
};

//! What a warm start did. Counts are of index records (one per key).
struct warm_start_report {
  std::size_t index_records = 0;    //!< records in the index
  std::size_t index_bad_lines = 0;  //!< index lines that failed their check: skipped
  std::size_t selected = 0;         //!< records for this device, NVRTC and name prefix
  std::size_t loaded = 0;           //!< entries read into the compiler's memory cache
  std::size_t already = 0;          //!< in memory already, or being compiled or loaded by another thread: left
  std::size_t libraries = 0;        //!< libraries loaded, or found loaded by the kernel cache
  std::size_t functions = 0;        //!< kernels resolved in `warm_start_options::functions_in`
  std::size_t stale = 0;            //!< records whose entry is gone (evicted): skipped
  std::size_t rejected = 0;         //!< entries that failed their checks: deleted, never loaded
  std::size_t failed = 0;           //!< entries not loaded as libraries (disagreeing with their record, a PTX too new
                                    //!< for the driver, an image the driver refused); their compiles still hit memory
  std::size_t index_lines_removed = 0;  //!< by the index's rewrite, when there was one
  bool nvrtc_identity_known = false;    //!< the NVRTC version was known (records of other versions were left)
  bool nvrtc_loaded = false;            //!< NVRTC was in this process when the warm start ended (never loaded by it)
  double seconds = 0;                   //!< from the constructor to the end
  std::vector<std::string> problems;    //!< one line per stale, rejected or failed entry (the first 32)
  std::string error;                    //!< why nothing was loaded (no driver, no such device); empty otherwise
};

//! One warm start, running from construction on its own threads. Move-only; destroying it cancels what is left
//! and waits for the entries being loaded.
class warm_start {
 public:
  //! Starts loading, for device `device_ordinal`, into `cache` (and its compiler), which must outlive this object.
  //! Returns at once: the driver, the index and the entries are all read on the warm start's threads.
  explicit warm_start(kernel_cache& cache, int device_ordinal = 0, warm_start_options options = {});
  warm_start(warm_start&&) noexcept;
  warm_start& operator=(warm_start&&) noexcept;
  warm_start(const warm_start&) = delete;
  warm_start& operator=(const warm_start&) = delete;
  ~warm_start();

  //! True once it has ended (or this object is empty).
  bool ready() const noexcept;
  //! Blocks until it has ended; the report lives as long as this object. Throws nothing: errors are in the report.
  const warm_start_report& wait() const;
  //! Stops after the entries being loaded now; the report counts what was done.
  void cancel() noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace cuasync::runtime
