#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <pwd.h>
#include <random>
#include <vector>

namespace cuasync::jit {
namespace fs = std::filesystem;
namespace {

constexpr char magic[8] = {'C', 'U', 'A', 'S', 'J', 'I', 'T', '\0'};
constexpr const char* entry_suffix = ".jit";

// The fixed header at the start of every entry. The magic and the format version come first in every format, so
// an entry of any version can be recognised as such.
struct entry_header {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t header_size;
  std::uint64_t key_low, key_high;
  std::uint64_t payload_size;
  std::uint64_t checksum_low, checksum_high;  // XXH3-128 over this header (checksum zeroed) and the payload
};
static_assert(sizeof(entry_header) == 56);

[[noreturn]] void throw_cache(std::errc e, std::string what, std::source_location where) {
  throw cache_error(std::make_error_code(e), "cuasync::jit::disk_cache", std::move(what), where);
}
[[noreturn]] void throw_errno(int err, std::string what, std::source_location where) {
  throw cache_error(std::error_code(err, std::generic_category()), "cuasync::jit::disk_cache",
                    std::move(what) + ": " + std::strerror(err), where);
}

std::string user_name(uid_t uid) {
  if (const passwd* pw = ::getpwuid(uid)) return std::string(pw->pw_name);
  return "?";
}

std::string octal_mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Appends little-endian-as-host plain values and length-prefixed strings.
struct writer {
  std::string out;
  template <class T>
  void value(const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(std::string_view s) {
    value(static_cast<std::uint64_t>(s.size()));
    out.append(s);
  }
};

// Reads what `writer` wrote; every read is bounds-checked.
struct reader {
  std::string_view in;
  bool ok = true;
  template <class T>
  T value() {
    T v{};
    if (in.size() < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string str() {
    const auto n = value<std::uint64_t>();
    if (!ok || n > in.size()) {
      ok = false;
      return {};
    }
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
};

timespec now_realtime() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

// Sets the modification time (the LRU position) precisely: file systems stamp writes with a coarse clock.
void touch(int fd) {
  const timespec times[2] = {{0, UTIME_OMIT}, now_realtime()};
  ::futimens(fd, times);
}

bool is_entry_name(std::string_view name) {
  return name.size() == 32 + std::strlen(entry_suffix) && name.substr(32) == entry_suffix;
}
bool is_temp_name(std::string_view name) { return name.starts_with(".") && name.find(".tmp.") != std::string_view::npos; }

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
  std::string suffix = s.substr(pos);
  if (suffix == "K" || suffix == "k" || suffix == "KiB") return v << 10;
  if (suffix == "M" || suffix == "m" || suffix == "MiB") return v << 20;
  if (suffix == "G" || suffix == "g" || suffix == "GiB") return v << 30;
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

namespace detail {

void secure_directory(const fs::path& dir, const char* what, std::source_location where) {
  if (dir.empty()) throw_cache(std::errc::invalid_argument, std::string("empty ") + what + " path", where);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw_errno(errno, std::string("cannot inspect the ") + what + " '" + dir.string() + "'", where);
    std::error_code ec;
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw_errno(errno, std::string("cannot create the ") + what + " '" + dir.string() +
                             "' (set CUASYNC_CACHE_DIR to a writable directory, or CUASYNC_CACHE=0 to turn the cache "
                             "off)",
                  where);
    if (::stat(dir.c_str(), &st) != 0)
      throw_errno(errno, std::string("cannot inspect the ") + what + " '" + dir.string() + "'", where);
  }
  if (!S_ISDIR(st.st_mode))
    throw_cache(std::errc::not_a_directory,
                std::string("the ") + what + " '" + dir.string() +
                    "' is not a directory (set CUASYNC_CACHE_DIR to a directory)",
                where);
  const uid_t me = ::geteuid();
  if (st.st_uid != me)
    throw_cache(std::errc::permission_denied,
                std::string("refusing the ") + what + " '" + dir.string() + "': it is owned by another user (" +
                    user_name(st.st_uid) + ", uid " + std::to_string(st.st_uid) + "), not by this process's user (" +
                    user_name(me) + ", uid " + std::to_string(me) +
                    "), who could plant code that this process would load. Use a directory of your own "
                    "(CUASYNC_CACHE_DIR) or turn the cache off (CUASYNC_CACHE=0)",
                where);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw_cache(std::errc::permission_denied,
                std::string("refusing the ") + what + " '" + dir.string() + "': it is writable by " +
                    ((st.st_mode & S_IWOTH) ? "every user" : "its group") + " (mode " + octal_mode(st.st_mode) +
                    "), so others could plant code that this process would load. Run chmod 700 '" + dir.string() +
                    "', use another directory (CUASYNC_CACHE_DIR), or turn the cache off (CUASYNC_CACHE=0)",
                where);
}

}  // namespace detail

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
          counters_.stores.load(), counters_.store_failures.load(), counters_.evictions.load()};
}

std::string disk_cache::last_rejection() const {
  std::lock_guard lock(mutex_);
  return last_rejection_;
}

std::string disk_cache::serialize(const cache_key& key, const compiled_program& p, std::uint32_t format_version) {
  writer payload;
  payload.value(static_cast<std::uint8_t>(p.target.kind));
  payload.value(static_cast<std::int32_t>(p.target.arch));
  payload.value(static_cast<std::int32_t>(p.nvrtc_version));
  payload.str(p.name);
  payload.str(p.log);
  payload.value(static_cast<std::uint64_t>(p.lowered_names.size()));
  for (const auto& [expr, lowered] : p.lowered_names) {
    payload.str(expr);
    payload.str(lowered);
  }
  payload.str(p.text());

  entry_header h{};
  std::memcpy(h.magic, magic, sizeof magic);
  h.format_version = format_version;
  h.header_size = sizeof h;
  h.key_low = key.low;
  h.key_high = key.high;
  h.payload_size = payload.out.size();
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += payload.out;
  const cache_key sum = checksum(out.data(), out.size());  // checksum fields are zero here
  h.checksum_low = sum.low;
  h.checksum_high = sum.high;
  std::memcpy(out.data(), &h, sizeof h);
  return out;
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

std::optional<compiled_program> disk_cache::load(const cache_key& key) noexcept {
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
      reject(path, &id, std::move(why));
      return std::nullopt;
    };
    if (!read_ok) return bad("not a regular file, or unreadable");
    std::string why;
    std::optional<compiled_program> p = detail::decode_entry(std::move(bytes), key, why);
    if (!p) return bad(std::move(why));
    touch(fd);
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

std::optional<compiled_program> decode_entry(std::string bytes, const cache_key& key, std::string& why) {
  auto bad = [&](std::string w) -> std::optional<compiled_program> {
    why = std::move(w);
    return std::nullopt;
  };
  entry_header h{};
  if (bytes.size() < sizeof h)
    return bad("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, magic, sizeof magic) != 0) return bad("not a cuasync cache entry (bad magic)");
  if (h.format_version != cache_format_version)
    return bad("format version " + std::to_string(h.format_version) + ", but this cuasync reads version " +
               std::to_string(cache_format_version));
  if (h.header_size != sizeof h) return bad("header size " + std::to_string(h.header_size));
  if (h.payload_size != bytes.size() - sizeof h)
    return bad((bytes.size() - sizeof h < h.payload_size ? "truncated: " : "trailing bytes: ") +
               std::to_string(bytes.size()) + " bytes, expected " + std::to_string(sizeof h + h.payload_size));
  if (h.key_low != key.low || h.key_high != key.high)
    return bad("holds the entry of another key (" + cache_key{h.key_low, h.key_high}.hex() + ")");
  const cache_key stored{h.checksum_low, h.checksum_high};
  entry_header zeroed = h;
  zeroed.checksum_low = zeroed.checksum_high = 0;
  std::memcpy(bytes.data(), &zeroed, sizeof zeroed);
  if (checksum(bytes.data(), bytes.size()) != stored) return bad("checksum mismatch: the entry is corrupt");
  return decode_payload(std::string_view(bytes).substr(sizeof h), why);
}

std::optional<compiled_program> decode_payload(std::string_view payload, std::string& why) {
  reader r{payload};
  compiled_program p;
  const auto kind = r.value<std::uint8_t>();
  p.target.arch = r.value<std::int32_t>();
  p.nvrtc_version = r.value<std::int32_t>();
  p.name = r.str();
  p.log = r.str();
  const auto n = r.value<std::uint64_t>();
  if (!r.ok || kind > static_cast<std::uint8_t>(output_kind::ltoir) || n > payload.size()) {
    why = "malformed payload";
    return std::nullopt;
  }
  p.target.kind = static_cast<output_kind>(kind);
  for (std::uint64_t i = 0; i < n && r.ok; ++i) {
    std::string expr = r.str();
    std::string lowered = r.str();
    p.lowered_names.emplace_back(std::move(expr), std::move(lowered));
  }
  const std::string image = r.str();
  if (!r.ok || !r.in.empty() || image.empty()) {
    why = "malformed payload";
    return std::nullopt;
  }
  p.image.resize(image.size());
  std::memcpy(p.image.data(), image.data(), image.size());
  return p;
}

std::string read_up_to(int fd, std::size_t size) {
  std::string bytes(size, '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

void write_file_atomically(const fs::path& final_path, std::string_view bytes, const char* what,
                           std::source_location where) {
  static std::atomic<unsigned> sequence{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string temp_name = ".";  // hidden, and never taken for an entry: see is_temp_name
  temp_name += final_path.filename().string();
  temp_name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence.fetch_add(1)) + "." +
               std::to_string(rng() % 1000000);
  const fs::path temp = final_path.parent_path() / temp_name;
  auto fail = [&](int err, const char* doing) {
    ::unlink(temp.c_str());
    throw_errno(err, std::string(doing) + " " + what + " '" + temp.string() + "'", where);
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail(errno, "cannot create");
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail(err, "cannot write");
    }
    written += static_cast<std::size_t>(n);
  }
  touch(fd);
  if (::close(fd) != 0) fail(errno, "cannot write");
  if (::rename(temp.c_str(), final_path.c_str()) != 0) fail(errno, "cannot rename into place");
}

}  // namespace detail

void disk_cache::store(const cache_key& key, const compiled_program& program, std::source_location where) {
  const fs::path final_path = entry_path(key);
  try {
    detail::write_file_atomically(final_path, serialize(key, program), "the cache entry", where);
  } catch (const cache_error&) {
    counters_.store_failures.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  counters_.stores.fetch_add(1, std::memory_order_relaxed);
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
  const auto now = now_realtime();
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
