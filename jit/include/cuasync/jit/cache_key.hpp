// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The cache key: an XXH3-128 hash over everything that changes a compile's output — the source, every
//! in-memory header's name and contents, the name expressions, every option (and the toolkit include directories
//! they add), the target, the NVRTC (its version and library file) and the cache format version. Files read through
//! include paths are covered by their directory (and, for the toolkit's, by the NVRTC), not by their contents: see
//! `compile_options::include_paths`. The driver is not in it: NVRTC's output does not depend on the driver (a PTX
//! image the driver cannot JIT is refused when it is loaded, from a cache or not: `check_ptx_loadable`).

#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/options.hpp>
#include <cuasync/jit/program.hpp>
#include <cuasync/jit/target.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuasync::jit {

//! The version of the on-disk entry format. Entries of another version are rejected, deleted and recompiled.
inline constexpr std::uint32_t cache_format_version = 1;

//! A 128-bit key.
struct cache_key {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  //! 32 lowercase hex digits (the entry's file name).
  std::string hex() const;
  friend bool operator==(const cache_key&, const cache_key&) = default;
};

//! For `std::unordered_map<cache_key, ...>`: the key is already a good hash.
struct cache_key_hash {
  std::size_t operator()(const cache_key& k) const noexcept { return static_cast<std::size_t>(k.low ^ k.high); }
};

//! The key of compiling `p` for `t` with `o` by an NVRTC known only by its version `nvrtc_version` (13000): no
//! library file, so not the key a compiler uses (the overload below, with the NVRTC's identity). Costs one pass of
//! XXH3 over the source and headers (tens of GB/s): a few hundred nanoseconds for a typical kernel.
//! The toolkit include directories hashed are `toolkit_include_dirs()`: this loads NVRTC when `o.toolkit_includes`.
cache_key make_cache_key(const program& p, const target& t, const compile_options& o, int nvrtc_version,
                         std::uint32_t format_version = cache_format_version);
//! The same for the NVRTC `nvrtc` describes (its version, its library path, and the toolkit include directories that
//! belong to that path): never loads NVRTC. What `compiler` keys by, with the loaded NVRTC's `nvrtc_info` or the
//! identity recorded for it (equal for the same library).
cache_key make_cache_key(const program& p, const target& t, const compile_options& o, const nvrtc_info& nvrtc,
                         std::uint32_t format_version = cache_format_version);

//! XXH3-128 of a byte range (the entries' checksum).
cache_key checksum(const void* data, std::size_t size) noexcept;

}  // namespace cuasync::jit
