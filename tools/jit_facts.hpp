// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What `cuasync info` says about the JIT side: the NVRTC this process loads and the disk cache's directory, entries,
// size, hit rates (the counts every process that used it added) and its index (what a warm start would load). Read without a GPU, and without creating the
// cache directory.
#include <cuasync/jit/cache_counts.hpp>

#include <cstdint>
#include <string>

namespace cuasync::trace::json {
class writer;
}

namespace cuasync::tools {

struct jit_facts {
  std::string nvrtc_error;  //!< why NVRTC did not load (empty: it did)
  std::string nvrtc_version, nvrtc_library;
  std::size_t supported_archs = 0;
  int oldest_arch = 0, newest_arch = 0;
  bool cache_enabled = false;
  std::string cache_directory, cache_note;  //!< the note: off, not created yet, unreadable size setting
  std::size_t cache_entries = 0;
  std::uint64_t cache_bytes = 0, cache_max_bytes = 0;
  jit::cache_counts counts;  //!< summed over the processes that used the cache (`cache_counts.hpp`)
  std::size_t index_records = 0, index_bad_lines = 0;  //!< the cache index a warm start reads (`cache_index.hpp`)
};

jit_facts read_jit_facts();
void print_text(const jit_facts& f);
//! Adds "nvrtc" and "jit_cache" members to an object being written.
void add_json(trace::json::writer& w, const jit_facts& f);

}  // namespace cuasync::tools
