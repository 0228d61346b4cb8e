// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Knowing which NVRTC this process would load, without loading it. Loading NVRTC (a 109 MB library and its
//! initialisers) costs 5-7 ms, thirty times a disk-cache hit; but the cache key needs NVRTC's version and the target
//! needs its architectures. So whenever a process loads NVRTC (any cache miss), it records NVRTC's identity
//! (version, supported architectures, resolved path) in the cache directory's `nvrtc-identity` file, under a
//! fingerprint of everything that decides which library the dynamic loader picks:
//! - `$CUASYNC_LIBNVRTC`, `$LD_LIBRARY_PATH`, `$LD_PRELOAD`, `$CUASYNC_NVRTC_SEARCH_PATH` and the stat of each of
//!   its folders;
//! - the stat (device, inode, size, modification and change times in ns) of `/etc/ld.so.cache`,
//!   `/etc/ld.so.preload`, the executable (`/proc/self/exe`: its RUNPATH), and the shared object holding this code
//!   when that is not the executable;
//! - the stat of every directory the loader searches for a `dlopen` from this code (`dlinfo(RTLD_DI_SERINFO)`:
//!   `LD_LIBRARY_PATH` as the loader read it at start-up, RUNPATH/RPATH, the system directories), so that a library
//!   added to one of them changes the fingerprint.
//! The record also holds the stat of the library file that was loaded. A later process whose fingerprint matches a
//! record, whose recorded library file still has the recorded stat, and which has no NVRTC mapped already, uses the
//! recorded identity for the target and the key; on a disk hit it never loads NVRTC. On a miss it loads NVRTC, and a
//! different identity (which should not happen) is recorded and the key recomputed. Anything uncertain (no file, a
//! bad checksum, no matching record, a changed library) means: load NVRTC, as without the record.
//!
//! The file is text, one record per line, newest first, at most `max_nvrtc_identity_records`, ending with an XXH3-128
//! checksum line; it is written like cache entries (a temporary file in the directory, then `rename`).

#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace cuasync::jit {

//! The file's name in the cache directory.
inline constexpr const char* nvrtc_identity_file_name = "nvrtc-identity";
//! The most records the file keeps (one per fingerprint: per executable and loader environment).
inline constexpr std::size_t max_nvrtc_identity_records = 16;

//! The fingerprint of the loader's choice of NVRTC in this process, with `$CUASYNC_LIBNVRTC` = `libnvrtc_env`
//! (nothing: unset). Costs a few dozen `stat` calls.
cache_key nvrtc_loader_fingerprint(const std::optional<std::string>& libnvrtc_env);

//! The NVRTC identity recorded in `cache_dir` for this process's fingerprint (with `$CUASYNC_LIBNVRTC` as it is
//! now), or nothing: no file, a bad file, no matching record, a recorded library whose stat changed, or an NVRTC
//! already mapped into this process (loading it then costs nothing). Never loads NVRTC; never throws.
std::optional<nvrtc_info> recorded_nvrtc_identity(const std::filesystem::path& cache_dir) noexcept;

//! Records the loaded NVRTC's identity in `cache_dir` under the fingerprint of the loader's choice when it was
//! loaded, unless an identical record is there. Returns true when it wrote the file.
//! @throws nvrtc_not_found_error when NVRTC is not loaded and cannot be; cache_error when the file cannot be written.
bool record_nvrtc_identity(const std::filesystem::path& cache_dir,
                           std::source_location where = std::source_location::current());

//! True when `a` and `b` describe the same NVRTC: version, architectures and library path.
bool same_nvrtc_identity(const nvrtc_info& a, const nvrtc_info& b) noexcept;

}  // namespace cuasync::jit
