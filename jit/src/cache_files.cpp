// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Files of the cache (entries, the NVRTC identity, precompiled headers): a directory checked before anything in it
// is trusted, whole reads, and writes that appear atomically under their final name.
#include "cache_files.hpp"

#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace cuasync::jit {
namespace fs = std::filesystem;
namespace {

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

}  // namespace

namespace detail {

timespec now_realtime() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

// Sets the modification time (the LRU position) precisely: file systems stamp writes with a coarse clock.
void touch(int fd) noexcept {
  const timespec times[2] = {{0, UTIME_OMIT}, now_realtime()};
  ::futimens(fd, times);
}

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
}  // namespace cuasync::jit
