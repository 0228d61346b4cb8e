// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The `nvrtc-identity` record: which NVRTC the loader would pick in a process like this one, and what it is, so that
// a disk-cache hit needs no NVRTC. See nvrtc_identity.hpp for what the fingerprint covers and why.
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>
#include <cuasync/jit/nvrtc_identity.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace cuasync::jit {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view file_header = "cuasync nvrtc-identity 1\n";
constexpr std::string_view checksum_prefix = "checksum ";
constexpr std::size_t max_file_bytes = 64 * 1024;

// Length-prefixed fields, so that no two different inputs give the same bytes.
struct field_writer {
  std::string out;
  void str(std::string_view s) {
    const auto n = static_cast<std::uint64_t>(s.size());
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out.append(s);
  }
  template <class T>
  void value(const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void env(const char* name) {
    const char* v = std::getenv(name);
    value(v != nullptr);
    if (v) str(v);
  }
  // What identifies a file's version: where it is (device, inode), its size and its times. A missing file counts
  // too (its errno), so that one appearing changes the fingerprint.
  void file(const char* path) {
    struct stat st {};
    if (::stat(path, &st) != 0) {
      value(errno);
      return;
    }
    value(0);
    value(static_cast<std::uint64_t>(st.st_dev));
    value(static_cast<std::uint64_t>(st.st_ino));
    value(static_cast<std::uint64_t>(st.st_size));
    value(static_cast<std::int64_t>(st.st_mtim.tv_sec));
    value(static_cast<std::int64_t>(st.st_mtim.tv_nsec));
    value(static_cast<std::int64_t>(st.st_ctim.tv_sec));
    value(static_cast<std::int64_t>(st.st_ctim.tv_nsec));
  }
};

// The library file's version as recorded: the same fields as `field_writer::file`.
struct file_stamp {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  friend bool operator==(const file_stamp&, const file_stamp&) = default;
};

std::optional<file_stamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return file_stamp{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                    static_cast<std::uint64_t>(st.st_size),
                    static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                    static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

void anchor() {}  // an address in the object that holds this code, for dladdr1

// True when some object whose name contains "libnvrtc" is mapped into this process (another library or the host
// application loaded NVRTC): the loader would then hand that one to a dlopen by soname.
bool nvrtc_mapped() noexcept {
  return ::dl_iterate_phdr(
             [](dl_phdr_info* info, std::size_t, void*) -> int {
               return info->dlpi_name && std::strstr(info->dlpi_name, "libnvrtc") ? 1 : 0;
             },
             nullptr) != 0;
}

// True when /proc/self/maps maps a file of device `dev` and inode `ino`: the file at the library's path is the one
// this process loaded, not one installed over it since.
bool mapped_file_is(std::uint64_t dev, std::uint64_t ino) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, maps)) {
    unsigned long long start, end, offset, inode;
    unsigned major, minor;
    char perms[8];
    if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &offset, &major, &minor, &inode) ==
            7 &&
        inode == ino && ::makedev(major, minor) == dev)
      found = true;
  }
  std::fclose(maps);
  return found;
}

struct record {
  cache_key fingerprint;
  nvrtc_info info;
  file_stamp stamp;
};

std::string hex(const cache_key& k) { return k.hex(); }

std::optional<cache_key> parse_hex_key(std::string_view s) {
  if (s.size() != 32) return std::nullopt;
  cache_key k;
  auto half = [](std::string_view h, std::uint64_t& v) {
    auto [p, e] = std::from_chars(h.data(), h.data() + h.size(), v, 16);
    return e == std::errc{} && p == h.data() + h.size();
  };
  if (!half(s.substr(0, 16), k.high) || !half(s.substr(16), k.low)) return std::nullopt;
  return k;
}

std::string format_record(const record& r) {
  std::string archs;
  for (int a : r.info.supported_archs) {
    if (!archs.empty()) archs += ',';
    archs += std::to_string(a);
  }
  return hex(r.fingerprint) + " " + std::to_string(r.info.major) + " " + std::to_string(r.info.minor) + " " +
         std::to_string(r.stamp.dev) + " " + std::to_string(r.stamp.ino) + " " + std::to_string(r.stamp.size) + " " +
         std::to_string(r.stamp.mtime_ns) + " " + std::to_string(r.stamp.ctime_ns) + " " + archs + " " +
         r.info.library + "\n";
}

template <class T>
bool parse_number(std::string_view s, T& v) {
  auto [p, e] = std::from_chars(s.data(), s.data() + s.size(), v);
  return e == std::errc{} && p == s.data() + s.size() && !s.empty();
}

std::optional<record> parse_record(std::string_view line) {
  std::string_view f[9];
  for (auto& field : f) {
    const auto space = line.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    field = line.substr(0, space);
    line.remove_prefix(space + 1);
  }
  record r;
  const auto fp = parse_hex_key(f[0]);
  if (!fp) return std::nullopt;
  r.fingerprint = *fp;
  if (!parse_number(f[1], r.info.major) || !parse_number(f[2], r.info.minor) || !parse_number(f[3], r.stamp.dev) ||
      !parse_number(f[4], r.stamp.ino) || !parse_number(f[5], r.stamp.size) ||
      !parse_number(f[6], r.stamp.mtime_ns) || !parse_number(f[7], r.stamp.ctime_ns))
    return std::nullopt;
  for (std::string_view archs = f[8]; !archs.empty();) {
    const auto comma = archs.find(',');
    int a = 0;
    if (!parse_number(archs.substr(0, comma), a) || a <= 0) return std::nullopt;
    if (!r.info.supported_archs.empty() && a <= r.info.supported_archs.back()) return std::nullopt;  // ascending
    r.info.supported_archs.push_back(a);
    archs = comma == std::string_view::npos ? std::string_view{} : archs.substr(comma + 1);
  }
  if (r.info.major <= 0 || r.info.minor < 0 || r.info.supported_archs.empty() || line.empty() || line[0] != '/')
    return std::nullopt;
  r.info.library = std::string(line);
  return r;
}

// The records of the file in `dir`, newest first; nothing when it is missing or not exactly what we write.
std::optional<std::vector<record>> read_records(const fs::path& dir) noexcept {
  try {
    const fs::path path = dir / nvrtc_identity_file_name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    std::string bytes;
    bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
              static_cast<std::uint64_t>(st.st_size) <= max_file_bytes;
    if (ok) {
      bytes = detail::read_up_to(fd, static_cast<std::size_t>(st.st_size));
      ok = bytes.size() == static_cast<std::size_t>(st.st_size);
    }
    ::close(fd);
    if (!ok || !bytes.ends_with('\n')) return std::nullopt;
    // The last line is "checksum <hex>" over everything before it.
    const auto last = bytes.rfind('\n', bytes.size() - 2);
    if (last == std::string::npos) return std::nullopt;
    std::string_view tail = std::string_view(bytes).substr(last + 1);
    tail.remove_suffix(1);
    if (!tail.starts_with(checksum_prefix)) return std::nullopt;
    const auto stored = parse_hex_key(tail.substr(checksum_prefix.size()));
    const std::string_view body = std::string_view(bytes).substr(0, last + 1);
    if (!stored || checksum(body.data(), body.size()) != *stored || !body.starts_with(file_header))
      return std::nullopt;
    std::vector<record> out;
    for (std::string_view rest = body.substr(file_header.size()); !rest.empty();) {
      const auto nl = rest.find('\n');
      auto r = parse_record(rest.substr(0, nl));
      if (!r) return std::nullopt;
      out.push_back(std::move(*r));
      rest.remove_prefix(nl + 1);
    }
    return out;
  } catch (...) {
    return std::nullopt;
  }
}

void write_records(const fs::path& dir, const std::vector<record>& records, std::source_location where) {
  std::string bytes(file_header);
  for (const auto& r : records) bytes += format_record(r);
  bytes += std::string(checksum_prefix) + hex(checksum(bytes.data(), bytes.size())) + "\n";
  detail::write_file_atomically(dir / nvrtc_identity_file_name, bytes, "the NVRTC identity file", where);
}

}  // namespace

cache_key nvrtc_loader_fingerprint(const std::optional<std::string>& libnvrtc_env) {
  field_writer w;
  w.str("cuasync nvrtc loader fingerprint 1");
  w.value(libnvrtc_env.has_value());
  if (libnvrtc_env) w.str(*libnvrtc_env);
  w.env("LD_LIBRARY_PATH");
  w.env("LD_PRELOAD");
  // The loader's own folders, tried after the system's: a library appearing in one changes the folder's times.
  w.env("CUASYNC_NVRTC_SEARCH_PATH");
  for (const auto& dir : detail::nvrtc_search_path()) w.file(dir.c_str());
  w.file("/etc/ld.so.cache");
  w.file("/etc/ld.so.preload");
  w.file("/proc/self/exe");
  Dl_info where{};
  link_map* self = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&anchor), &where, reinterpret_cast<void**>(&self), RTLD_DL_LINKMAP) && self) {
    // The object that calls dlopen: its RUNPATH, when it is a shared library rather than the executable.
    const bool is_executable = !self->l_name || !*self->l_name;
    w.value(is_executable);
    if (!is_executable) {
      w.str(self->l_name);
      w.file(self->l_name);
    }
    // Every directory the loader would search for a dlopen from that object (glibc: the handle is the link_map).
    Dl_serinfo size{};
    if (::dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size >= sizeof(Dl_serinfo)) {
      std::unique_ptr<std::max_align_t[]> storage(
          new std::max_align_t[(size.dls_size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
      auto* info = reinterpret_cast<Dl_serinfo*>(storage.get());
      *info = size;
      if (::dlinfo(self, RTLD_DI_SERINFOSIZE, info) == 0 && ::dlinfo(self, RTLD_DI_SERINFO, info) == 0) {
        w.value(info->dls_cnt);
        for (unsigned i = 0; i < info->dls_cnt; ++i) {
          const char* dir = info->dls_serpath[i].dls_name;
          w.str(dir ? dir : "");
          if (dir) w.file(dir);
        }
      } else {
        w.str("no search path");
      }
    } else {
      w.str("no search path size");
    }
  } else {
    w.str("no dladdr");
  }
  return checksum(w.out.data(), w.out.size());
}

bool same_nvrtc_identity(const nvrtc_info& a, const nvrtc_info& b) noexcept {
  return a.major == b.major && a.minor == b.minor && a.supported_archs == b.supported_archs && a.library == b.library;
}

std::optional<nvrtc_info> recorded_nvrtc_identity(const fs::path& cache_dir) noexcept {
  try {
    if (nvrtc_mapped()) return std::nullopt;
    auto records = read_records(cache_dir);
    if (!records) return std::nullopt;
    std::optional<std::string> env;
    if (const char* v = std::getenv("CUASYNC_LIBNVRTC"); v && *v) env = v;
    const cache_key fp = nvrtc_loader_fingerprint(env);
    for (auto& r : *records) {
      if (r.fingerprint != fp) continue;
      const auto now = stamp_of(r.info.library);
      if (!now || *now != r.stamp) return std::nullopt;  // the library changed since it was recorded
      return std::move(r.info);
    }
    return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
}

bool record_nvrtc_identity(const fs::path& cache_dir, std::source_location where) {
  const nvrtc_info& info = nvrtc_library();
  record r{nvrtc_loader_fingerprint(detail::libnvrtc_env_at_load()), info, {}};
  const auto stamp = stamp_of(info.library);
  // Record only what can be checked later: an absolute path, one line, a file that is the one this process mapped
  // (not one installed over it since it was loaded), and architectures to select targets with.
  if (!stamp || info.library.empty() || info.library[0] != '/' ||
      info.library.find('\n') != std::string::npos || info.supported_archs.empty() ||
      !mapped_file_is(stamp->dev, stamp->ino))
    return false;
  r.stamp = *stamp;
  std::vector<record> records{r};
  if (auto old = read_records(cache_dir)) {
    for (auto& o : *old) {
      if (o.fingerprint == r.fingerprint) {
        if (o.stamp == r.stamp && same_nvrtc_identity(o.info, r.info)) return false;  // already there
        continue;
      }
      if (records.size() < max_nvrtc_identity_records) records.push_back(std::move(o));
    }
  }
  write_records(cache_dir, records, where);
  return true;
}

}  // namespace cuasync::jit
