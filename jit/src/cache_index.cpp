// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The disk cache's index (cache_index.hpp): records appended under flock, read back line by line (each line checked
// alone), and rewritten without its bad, superseded and stale lines.
#include <cuasync/jit/cache_index.hpp>

#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace cuasync::jit {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view header = "cuasync cache-index 1\n";

[[noreturn]] void throw_errno(int err, std::string what, std::source_location where) {
  throw cache_error(std::error_code(err, std::generic_category()), "cuasync::jit::cache_index",
                    std::move(what) + ": " + std::strerror(err), where);
}

const char* kind_name(output_kind k) {
  switch (k) {
    case output_kind::cubin: return "cubin";
    case output_kind::ptx: return "ptx";
    case output_kind::ltoir: return "ltoir";
  }
  return "?";
}

// Names may hold spaces ("stencil<float, 3>"): every byte outside '!'..'~', and '%' itself, as %XX.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u > ' ' && u < 0x7f && c != '%') {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    }
  }
  if (out.empty()) out = "%00";  // never an empty field (the empty name; a NUL is never in a name)
  return out;
}

bool unescape(std::string_view s, std::string& out) {
  out.clear();
  if (s == "%00") return true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    unsigned v = 0;
    if (i + 2 >= s.size()) return false;
    const auto r = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (r.ec != std::errc{} || r.ptr != s.data() + i + 3) return false;
    out += static_cast<char>(v);
    i += 2;
  }
  return true;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

template <class T>
bool number(std::string_view s, T& out, int base = 10) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return r.ec == std::errc{} && r.ptr == s.data() + s.size() && !s.empty();
}

std::string read_all(int fd) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

cache_index_contents parse(std::string_view text) {
  cache_index_contents c;
  const bool trusted = text.starts_with(header);
  std::size_t pos = trusted ? header.size() : 0;
  std::unordered_map<cache_key, std::size_t, cache_key_hash> slot;  // key -> its record's position
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    // A last line without its newline is a torn append: bad, as any line that fails its check.
    const bool complete = end != std::string_view::npos;
    if (!complete) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++c.lines;
    cache_index_record r;
    if (!trusted || !complete || !detail::parse_index_line(line, r)) {
      ++c.bad_lines;
      continue;
    }
    if (auto [it, added] = slot.try_emplace(r.key, c.records.size()); !added) {
      ++c.duplicates;
      c.records[it->second] = std::move(r);  // the later record of a key wins (same entry, stored again)
    } else {
      c.records.push_back(std::move(r));
    }
  }
  return c;
}

fs::path index_path(const fs::path& dir) { return dir / cache_index_file_name; }

}  // namespace

namespace detail {

std::string format_index_line(const cache_index_record& r) {
  std::string line = r.key.hex() + " " + kind_name(r.target.kind) + " " + std::to_string(r.target.arch) + " " +
                     std::to_string(r.nvrtc_version) + " " + std::to_string(r.bytes) + " " + escape(r.name);
  const std::string check = hex16(checksum(line.data(), line.size()).low);
  line += ' ';
  line += check;
  line += '\n';
  return line;
}

bool parse_index_line(std::string_view line, cache_index_record& out) {
  const auto last = line.rfind(' ');
  if (last == std::string_view::npos) return false;
  const std::string_view body = line.substr(0, last);
  std::uint64_t check = 0;
  if (line.size() - last - 1 != 16 || !number(line.substr(last + 1), check, 16)) return false;
  if (checksum(body.data(), body.size()).low != check) return false;
  std::string_view f[6];
  std::size_t n = 0, pos = 0;
  while (n < 6) {
    const auto sp = body.find(' ', pos);
    f[n++] = body.substr(pos, sp == std::string_view::npos ? std::string_view::npos : sp - pos);
    if (sp == std::string_view::npos) break;
    pos = sp + 1;
  }
  if (n != 6 || f[0].size() != 32 || f[5].find(' ') != std::string_view::npos) return false;
  cache_index_record r;
  if (!number(f[0].substr(0, 16), r.key.high, 16) || !number(f[0].substr(16), r.key.low, 16)) return false;
  if (f[1] == "cubin") r.target.kind = output_kind::cubin;
  else if (f[1] == "ptx") r.target.kind = output_kind::ptx;
  else if (f[1] == "ltoir") r.target.kind = output_kind::ltoir;
  else return false;
  if (!number(f[2], r.target.arch) || !number(f[3], r.nvrtc_version) || !number(f[4], r.bytes)) return false;
  if (!unescape(f[5], r.name)) return false;
  out = std::move(r);
  return true;
}

}  // namespace detail

cache_index_contents read_cache_index(const fs::path& cache_dir) noexcept {
  try {
    const int fd = ::open(index_path(cache_dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return {};
    ::flock(fd, LOCK_SH);  // no rewrite mid-read (appends are whole lines; a torn one is bad alone)
    const std::string text = read_all(fd);
    ::close(fd);  // releases the lock
    return parse(text);
  } catch (...) {  // out of memory: no index, as without one
    return {};
  }
}

void append_cache_index(const fs::path& cache_dir, const cache_index_record& record, std::source_location where) {
  const fs::path path = index_path(cache_dir);
  const std::string line = detail::format_index_line(record);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) throw_errno(errno, "cannot open the cache index '" + path.string() + "'", where);
    struct stat mine {}, now {};
    if (::flock(fd, LOCK_EX) != 0 || ::fstat(fd, &mine) != 0) {
      const int err = errno;
      ::close(fd);
      throw_errno(err, "cannot lock the cache index '" + path.string() + "'", where);
    }
    // A compaction renamed a new index over the one this opened: append to the new one instead.
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev) {
      ::close(fd);
      continue;
    }
    std::string bytes = mine.st_size == 0 ? std::string(header) + line : line;
    char last = '\n';  // a torn line (a writer that died mid-append) ends before this record starts
    if (mine.st_size > 0 && ::pread(fd, &last, 1, mine.st_size - 1) == 1 && last != '\n') bytes.insert(0, 1, '\n');
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(bytes.size()))
      throw_errno(n < 0 ? err : ENOSPC, "cannot append to the cache index '" + path.string() + "'", where);
    return;
  }
  throw_errno(EAGAIN, "the cache index '" + path.string() + "' kept being replaced", where);
}

std::size_t compact_cache_index(const fs::path& cache_dir, std::source_location where) {
  const fs::path path = index_path(cache_dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  if (::flock(fd, LOCK_EX) != 0) {  // appenders wait; they append to the new file once it is renamed into place
    const int err = errno;
    ::close(fd);
    throw_errno(err, "cannot lock the cache index '" + path.string() + "'", where);
  }
  try {
    const cache_index_contents c = parse(read_all(fd));
    std::string text(header);
    std::size_t kept = 0;
    for (const auto& r : c.records) {
      struct stat st {};
      if (::stat((cache_dir / (r.key.hex() + ".jit")).c_str(), &st) != 0) continue;  // evicted: stale
      text += detail::format_index_line(r);
      ++kept;
    }
    if (kept < c.lines) detail::write_file_atomically(path, text, "the cache index", where);
    ::close(fd);
    return c.lines - kept;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

}  // namespace cuasync::jit
