// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cache_counts.hpp: the counts file, read and added to under flock (read-modify-write in place: the file is a few
// dozen bytes, and a torn one only restarts the counts).
#include <cuasync/jit/cache_counts.hpp>

#include <cstdio>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace cuasync::jit {
namespace {

struct field {
  const char* name;
  std::uint64_t cache_counts::*member;
};
constexpr field fields[] = {{"memory_hits", &cache_counts::memory_hits},
                            {"memory_misses", &cache_counts::memory_misses},
                            {"disk_hits", &cache_counts::disk_hits},
                            {"disk_misses", &cache_counts::disk_misses},
                            {"compiles", &cache_counts::compiles},
                            {"links", &cache_counts::links},
                            {"processes", &cache_counts::processes}};

// Every field, once, in the file's own words; anything else: nothing (start again).
bool parse(const std::string& text, cache_counts& out) {
  std::istringstream in(text);
  std::string name;
  std::uint64_t value = 0;
  std::size_t seen = 0;
  cache_counts c;
  while (in >> name >> value) {
    bool known = false;
    for (const field& f : fields)
      if (name == f.name) {
        c.*f.member = value;
        known = true;
        ++seen;
      }
    if (!known) return false;
  }
  if (!in.eof() || seen != std::size(fields)) return false;
  out = c;
  return true;
}

std::string format(const cache_counts& c) {
  std::string out;
  for (const field& f : fields) out += std::string(f.name) + " " + std::to_string(c.*f.member) + "\n";
  return out;
}

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

double rate(std::uint64_t hits, std::uint64_t misses) {
  return hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0.0;
}

std::string count(std::uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

double cache_counts::memory_hit_rate() const noexcept { return rate(memory_hits, memory_misses); }
double cache_counts::disk_hit_rate() const noexcept { return rate(disk_hits, disk_misses); }

cache_counts& cache_counts::operator+=(const cache_counts& o) noexcept {
  for (const field& f : fields) this->*f.member += o.*f.member;
  return *this;
}

std::string cache_counts::describe() const {
  char pct[2][16];
  std::snprintf(pct[0], sizeof pct[0], "%.1f%%", 100.0 * memory_hit_rate());
  std::snprintf(pct[1], sizeof pct[1], "%.1f%%", 100.0 * disk_hit_rate());
  return "memory " + count(memory_hits, "hit", "hits") + " / " + count(memory_misses, "miss", "misses") + " (" +
         pct[0] + "), disk " + count(disk_hits, "hit", "hits") + " / " + count(disk_misses, "miss", "misses") + " (" +
         pct[1] + "), " + count(compiles, "compile", "compiles") + ", " + count(links, "link", "links");
}

cache_counts read_cache_counts(const std::filesystem::path& cache_dir) noexcept {
  cache_counts c;
  try {
    const int fd = ::open((cache_dir / cache_counts_file_name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return c;
    ::flock(fd, LOCK_SH);  // not mid-update
    const std::string text = read_all(fd);
    ::close(fd);
    parse(text, c);
  } catch (...) {  // an allocation failure: no counts
  }
  return c;
}

bool add_cache_counts(const std::filesystem::path& cache_dir, const cache_counts& c) noexcept {
  try {
    const int fd = ::open((cache_dir / cache_counts_file_name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    bool ok = ::flock(fd, LOCK_EX) == 0;
    cache_counts total;
    if (ok) parse(read_all(fd), total);
    total += c;
    ++total.processes;
    const std::string text = format(total);
    ok = ok && ::lseek(fd, 0, SEEK_SET) == 0 && ::ftruncate(fd, 0) == 0 &&
         ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);  // releases the lock
    return ok;
  } catch (...) {
    return false;
  }
}

}  // namespace cuasync::jit
