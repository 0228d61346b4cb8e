// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The disk cache: where it lives (settings from the environment), loading and storing entries by key, rejecting
// bad ones, and evicting the least recently used. The entries' format is cache_entry_format.cpp; the files,
// cache_files.cpp.
#include "cache_files.hpp"

#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace cuasync::jit {
namespace fs = std::filesystem;
namespace {

constexpr const char* entry_suffix = ".jit";

bool is_entry_name(std::string_view name) {
  return name.size() == 32 + std::strlen(entry_suffix) && name.substr(32) == entry_suffix;
}
bool is_temp_name(std::string_view name) {
  return name.starts_with(".") && name.find(".tmp.") != std::string_view::npos;
}

struct file_identity {
  dev_t dev;
  ino_t ino;
};

std::uint64_t parse_size(const std::string& s, std::source_location where) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0)
    cuasync::detail::throw_invalid("cuasync::jit::disk_cache_settings",
                                   "CUASYNC_CACHE_SIZE='" + s + "' is not a size (bytes, or e.g. 512M, 2G)", where);
  if (s.find('-') != std::string::npos)  // stoull takes "-5" as 2^64 - 5
    cuasync::detail::throw_invalid("cuasync::jit::disk_cache_settings",
                                   "CUASYNC_CACHE_SIZE='" + s + "' is negative", where);
  std::string suffix = s.substr(pos);
  const auto scaled = [&](int shift) {
    if (v > (std::numeric_limits<std::uint64_t>::max() >> shift))  // would wrap, to 0 even: evict everything
      cuasync::detail::throw_invalid("cuasync::jit::disk_cache_settings",
                                     "CUASYNC_CACHE_SIZE='" + s + "' is larger than any disk", where);
    return static_cast<std::uint64_t>(v) << shift;
  };
  if (suffix == "K" || suffix == "k" || suffix == "KiB") return scaled(10);
  if (suffix == "M" || suffix == "m" || suffix == "MiB") return scaled(20);
  if (suffix == "G" || suffix == "g" || suffix == "GiB") return scaled(30);
  if (!suffix.empty())
    cuasync::detail::throw_invalid("cuasync::jit::disk_cache_settings",
                                   "CUASYNC_CACHE_SIZE='" + s + "' has an unknown suffix (use K, M or G)", where);
  return v;
}

}  // namespace

disk_cache_settings disk_cache_settings::from_environment(std::source_location where) {
  disk_cache_settings s;
  if (const char* v = std::getenv("CUASYNC_CACHE")) {
    const std::string_view off(v);
    if (off == "0" || off == "off" || off == "OFF" || off == "false" || off == "no") s.enabled = false;
  }
  if (const char* dir = std::getenv("CUASYNC_CACHE_DIR"); dir && *dir) {
    s.directory = dir;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    s.directory = fs::path(xdg) / "cuasync" / "jit";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    s.directory = fs::path(home) / ".cache" / "cuasync" / "jit";
  } else {
    s.directory = fs::temp_directory_path() / ("cuasync-" + std::to_string(::geteuid())) / "jit";
  }
  if (const char* size = std::getenv("CUASYNC_CACHE_SIZE"); size && *size) s.max_bytes = parse_size(size, where);
  return s;
}

disk_cache::disk_cache(fs::path directory, std::uint64_t max_bytes, std::source_location where)
    : directory_(std::move(directory)), max_bytes_(max_bytes) {
  detail::secure_directory(directory_, "cache directory", where);
}

fs::path disk_cache::entry_path(const cache_key& key) const { return directory_ / (key.hex() + entry_suffix); }

fs::path disk_cache::pch_directory(std::source_location where) const {
  fs::path dir = directory_ / "pch";
  detail::secure_directory(dir, "precompiled header directory", where);
  return dir;
}

disk_cache_stats disk_cache::stats() const noexcept {
  return {counters_.hits.load(), counters_.misses.load(), counters_.rejected.load(),
          counters_.stores.load(), counters_.store_failures.load(), counters_.evictions.load(),
          counters_.index_failures.load()};
}

std::string disk_cache::last_rejection() const {
  std::lock_guard lock(mutex_);
  return last_rejection_;
}

void disk_cache::reject(const fs::path& path, const void* identity, std::string why) noexcept {
  counters_.rejected.fetch_add(1, std::memory_order_relaxed);
  // Delete the bad file, but not an entry another process renamed into place since we opened it.
  const auto* id = static_cast<const file_identity*>(identity);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && (!id || (st.st_dev == id->dev && st.st_ino == id->ino)))
    ::unlink(path.c_str());
  try {
    std::lock_guard lock(mutex_);
    last_rejection_ = path.filename().string() + ": " + why;
  } catch (...) {
  }
}

std::optional<compiled_program> disk_cache::load(const cache_key& key, std::string* rejection) noexcept {
  try {
    const fs::path path = entry_path(key);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      counters_.misses.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    struct stat st {};
    std::string bytes;
    bool read_ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (read_ok) bytes = detail::read_up_to(fd, static_cast<std::size_t>(st.st_size));
    const file_identity id{st.st_dev, st.st_ino};
    auto bad = [&](std::string why) -> std::optional<compiled_program> {
      ::close(fd);
      counters_.misses.fetch_add(1, std::memory_order_relaxed);
      if (rejection) *rejection = why;
      reject(path, &id, std::move(why));
      return std::nullopt;
    };
    if (!read_ok) return bad("not a regular file, or unreadable");
    std::string why;
    std::optional<compiled_program> p = detail::decode_entry(std::move(bytes), key, why);
    if (!p) return bad(std::move(why));
    detail::touch(fd);
    ::close(fd);
    counters_.hits.fetch_add(1, std::memory_order_relaxed);
    return p;
  } catch (...) {  // out of memory: a miss
    counters_.misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
}

namespace detail {

std::uint64_t parse_cache_size(const std::string& text, std::source_location where) { return parse_size(text, where); }

}  // namespace detail

void disk_cache::store(const cache_key& key, const compiled_program& program, std::source_location where) {
  const fs::path final_path = entry_path(key);
  const std::string bytes = serialize(key, program);
  try {
    detail::write_file_atomically(final_path, bytes, "the cache entry", where);
  } catch (const cache_error&) {
    counters_.store_failures.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  counters_.stores.fetch_add(1, std::memory_order_relaxed);
  try {  // after the entry is in place: a record never names an entry that was not written
    append_cache_index(directory_, {key, program.target, program.nvrtc_version, bytes.size(), program.name}, where);
  } catch (const std::exception&) {
    counters_.index_failures.fetch_add(1, std::memory_order_relaxed);  // a warm start misses it; a compile finds it
  }
  evict_to(max_bytes_, final_path);
}

std::size_t disk_cache::evict_to(std::uint64_t bytes, const fs::path& keep) {
  struct entry {
    fs::path path;
    std::uint64_t size;
    timespec mtime;
  };
  std::vector<entry> entries;
  std::uint64_t total = 0;
  const auto now = detail::now_realtime();
  DIR* d = ::opendir(directory_.c_str());
  if (!d) return 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    const bool is_entry = is_entry_name(name);
    if (!is_entry && !is_temp_name(name)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!is_entry) {  // a writer that crashed between create and rename
      if (now.tv_sec - st.st_mtim.tv_sec > 600) ::unlinkat(::dirfd(d), e->d_name, 0);
      continue;
    }
    entries.push_back({directory_ / std::string(name), static_cast<std::uint64_t>(st.st_size), st.st_mtim});
    total += static_cast<std::uint64_t>(st.st_size);
  }
  ::closedir(d);
  if (total <= bytes) return 0;
  std::sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
    return a.path < b.path;
  });
  std::size_t removed = 0;
  for (const auto& e : entries) {
    if (total <= bytes) break;
    if (!keep.empty() && e.path == keep) continue;
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) {  // ENOENT: another process evicted it
      total -= e.size;
      ++removed;
    }
  }
  counters_.evictions.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

std::uint64_t disk_cache::size_bytes() const {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(directory_, ec))
    if (is_entry_name(e.path().filename().string()) && e.is_regular_file(ec)) total += e.file_size(ec);
  return total;
}

}  // namespace cuasync::jit
