// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// jit_facts.hpp: NVRTC and the JIT disk cache, for `cuasync info`.
#include "jit_facts.hpp"

#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/trace/json.hpp>

#include <cstdio>
#include <filesystem>

namespace cuasync::tools {

jit_facts read_jit_facts() {
  jit_facts f;
  try {
    const jit::nvrtc_info& n = jit::nvrtc_library();
    f.nvrtc_version = n.version_string();
    f.nvrtc_library = n.library;
    f.supported_archs = n.supported_archs.size();
    if (!n.supported_archs.empty()) {
      f.oldest_arch = n.supported_archs.front();
      f.newest_arch = n.supported_archs.back();
    }
  } catch (const cuda_error& e) {
    f.nvrtc_error = e.detail().empty() ? e.what() : e.detail();
  }
  try {
    const jit::disk_cache_settings s = jit::disk_cache_settings::from_environment();
    f.cache_enabled = s.enabled;
    f.cache_directory = s.directory.string();
    f.cache_max_bytes = s.max_bytes;
    if (!s.enabled) f.cache_note = "off (CUASYNC_CACHE=0)";
    std::error_code ec;
    if (s.enabled && !std::filesystem::is_directory(s.directory, ec)) f.cache_note = "not created yet";
    if (s.enabled && f.cache_note.empty())
      for (const auto& e : std::filesystem::directory_iterator(s.directory, ec))
        if (e.is_regular_file(ec) && e.path().extension() == ".jit") {
          ++f.cache_entries;
          f.cache_bytes += e.file_size(ec);
        }
    if (s.enabled && f.cache_note.empty()) {
      f.counts = jit::read_cache_counts(s.directory);
      const jit::cache_index_contents index = jit::read_cache_index(s.directory);
      f.index_records = index.records.size();
      f.index_bad_lines = index.bad_lines;
    }
  } catch (const cuda_error& e) {
    f.cache_note = e.detail().empty() ? e.what() : e.detail();
  }
  return f;
}

void print_text(const jit_facts& f) {
  std::printf("\nJIT\n");
  if (!f.nvrtc_error.empty())
    std::printf("  %-36s not loaded: %s\n", "NVRTC", f.nvrtc_error.c_str());
  else
    std::printf("  %-36s %s (%s), %zu architectures (sm_%d .. sm_%d)\n", "NVRTC", f.nvrtc_version.c_str(),
                f.nvrtc_library.c_str(), f.supported_archs, f.oldest_arch, f.newest_arch);
  std::printf("  %-36s %s\n", "disk cache", f.cache_directory.c_str());
  if (!f.cache_note.empty())
    std::printf("  %-36s %s\n", "", f.cache_note.c_str());
  else
    std::printf("  %-36s %zu entries, %.1f KiB (cap %.0f MiB)\n", "", f.cache_entries, f.cache_bytes / 1024.0,
                f.cache_max_bytes / 1048576.0);
  if (f.cache_note.empty() && f.cache_enabled) {
    if (f.counts.processes == 0)
      std::printf("  %-36s none recorded yet\n", "hit rates");
    else
      std::printf("  %-36s %s (%llu process%s)\n", "hit rates", f.counts.describe().c_str(),
                  static_cast<unsigned long long>(f.counts.processes), f.counts.processes == 1 ? "" : "es");
    std::printf("  %-36s %zu record%s%s (what a warm start loads)\n", "warm-start index", f.index_records,
                f.index_records == 1 ? "" : "s",
                f.index_bad_lines ? (", " + std::to_string(f.index_bad_lines) + " bad lines skipped").c_str() : "");
  }
}

void add_json(trace::json::writer& w, const jit_facts& f) {
  w.key("nvrtc").begin_object().member("loaded", f.nvrtc_error.empty());
  if (f.nvrtc_error.empty()) {
    w.member("version", f.nvrtc_version).member("library", f.nvrtc_library);
    w.member("supported_archs", static_cast<std::uint64_t>(f.supported_archs));
    w.member("oldest_arch", f.oldest_arch).member("newest_arch", f.newest_arch);
  } else {
    w.member("error", f.nvrtc_error);
  }
  w.end_object();
  w.key("jit_cache").begin_object().member("enabled", f.cache_enabled).member("directory", f.cache_directory);
  w.member("entries", static_cast<std::uint64_t>(f.cache_entries)).member("bytes", f.cache_bytes);
  w.member("max_bytes", f.cache_max_bytes).member("note", f.cache_note);
  const jit::cache_counts& c = f.counts;
  w.key("counts").begin_object().member("processes", c.processes).member("memory_hits", c.memory_hits);
  w.member("memory_misses", c.memory_misses).member("disk_hits", c.disk_hits).member("disk_misses", c.disk_misses);
  w.member("compiles", c.compiles).member("links", c.links);
  w.member("memory_hit_rate", c.memory_hit_rate()).member("disk_hit_rate", c.disk_hit_rate()).end_object();
  w.member("index_records", static_cast<std::uint64_t>(f.index_records));
  w.member("index_bad_lines", static_cast<std::uint64_t>(f.index_bad_lines));
  w.end_object();
}

}  // namespace cuasync::tools
