// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/unique_id_exchange.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/unique_fd.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace cuasync::collectives {

namespace {

// Version 2: the fetcher acknowledges the id with one byte, and only an acknowledged rank is counted (a client that
// left, before or after the send, is not).
constexpr char tag[16] = {'c', 'u', 'a', 's', 'y', 'n', 'c', '-', 'n', 'c', 'c', 'l', 'i', 'd', '-', '2'};
constexpr char ack = 'k';
using clock = std::chrono::steady_clock;

[[noreturn]] void fail(std::errc e, const char* api, const std::string& what, std::source_location where) {
  throw cuda_error(std::make_error_code(e), api, what, where);
}
[[noreturn]] void fail_errno(const char* call, const std::string& what, std::source_location where) {
  throw cuda_error(std::error_code(errno, std::generic_category()), call, what, where);
}

sockaddr_un address_of(const std::string& path, const char* api, std::source_location where) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    cuasync::detail::throw_invalid(api, "socket path '" + path + "' is empty or longer than " +
                                            std::to_string(sizeof a.sun_path - 1) + " bytes",
                                   where);
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

int ms_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits until `fd` is ready for `events`, or throws timed_out.
void wait_ready(int fd, short events, clock::time_point deadline, const char* api, const std::string& what,
                std::source_location where) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return;
    if (r == 0) fail(std::errc::timed_out, api, what, where);
    if (errno != EINTR) fail_errno("poll", what, where);
  }
}

}  // namespace

void publish_unique_id(const unique_id& id, const std::string& path, int receivers, std::chrono::milliseconds timeout,
                       std::source_location where) {
  constexpr const char* api = "cuasync::collectives::publish_unique_id";
  const sockaddr_un a = address_of(path, api, where);
  if (receivers < 0) cuasync::detail::throw_invalid(api, "negative receivers", where);
  const auto deadline = clock::now() + timeout;
  unique_fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) fail_errno("socket", path, where);
  // Only a socket is replaced (one left by an earlier run, whose publisher died before removing it): any other file
  // at `path` is somebody's data, or a directory, and is refused.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      fail(std::errc::file_exists, api,
           path + " exists and is not a socket" + (S_ISDIR(st.st_mode) ? " (a directory)" : "") +
               ": refusing to replace it; choose another path",
           where);
    ::unlink(path.c_str());
  }
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fail_errno("bind", path, where);
  // Removed at the end only while it is still our socket: another publisher on the same path (a later job) may have
  // replaced it, and its ranks are still fetching.
  struct stat bound {};
  const bool know_ours = ::lstat(path.c_str(), &bound) == 0;
  struct unlink_at_end {
    const std::string& p;
    bool known;
    struct stat ours;
    ~unlink_at_end() {
      struct stat now {};
      if (known && ::lstat(p.c_str(), &now) == 0 && now.st_dev == ours.st_dev && now.st_ino == ours.st_ino)
        ::unlink(p.c_str());
    }
  } remove_socket{path, know_ours, bound};
  if (::listen(s.get(), receivers + 1) != 0) fail_errno("listen", path, where);
  char message[sizeof tag + sizeof id.bytes];
  std::memcpy(message, tag, sizeof tag);
  std::memcpy(message + sizeof tag, id.bytes.data(), sizeof id.bytes);
  for (int served = 0; served < receivers;) {
    wait_ready(s.get(), POLLIN, deadline, api,
               path + ": " + std::to_string(served) + " of " + std::to_string(receivers) + " ranks fetched the id",
               where);
    unique_fd c(::accept4(s.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;  // that client left: the next one
      fail_errno("accept4", path, where);
    }
    // A client that leaves (EPIPE, ECONNRESET, or end of file before its acknowledgment) is its own problem, and is
    // not counted: the others are served until all ranks are, or the timeout. MSG_NOSIGNAL: no SIGPIPE for it. A
    // send alone cannot tell: it succeeds into the socket's buffer when the client leaves just after connecting.
    std::size_t sent = 0;
    while (sent < sizeof message) {
      ssize_t n = ::send(c.get(), message + sent, sizeof message - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      sent += static_cast<std::size_t>(n);
    }
    if (sent != sizeof message) continue;
    wait_ready(c.get(), POLLIN, deadline, api,
               path + ": a rank took the id but did not acknowledge it (" + std::to_string(served) + " of " +
                   std::to_string(receivers) + " ranks fetched it)",
               where);
    char reply = 0;
    ssize_t n;
    do {
      n = ::recv(c.get(), &reply, 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n == 1 && reply == ack) ++served;
  }
}

unique_id fetch_unique_id(const std::string& path, std::chrono::milliseconds timeout, std::source_location where) {
  constexpr const char* api = "cuasync::collectives::fetch_unique_id";
  const sockaddr_un a = address_of(path, api, where);
  const auto deadline = clock::now() + timeout;
  for (;;) {
    unique_fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) fail_errno("socket", path, where);
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      // Rank 0 has not bound the socket yet (or an old file is there): try again until the deadline.
      if (errno != ENOENT && errno != ECONNREFUSED && errno != EINTR) fail_errno("connect", path, where);
      if (clock::now() >= deadline) fail(std::errc::timed_out, api, path + ": nobody served the id", where);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    char message[sizeof tag + 128];
    std::size_t got = 0;
    while (got < sizeof message) {
      wait_ready(s.get(), POLLIN, deadline, api, path + ": the id did not arrive", where);
      ssize_t n = ::recv(s.get(), message + got, sizeof message - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_errno("recv", path, where);
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got != sizeof message || std::memcmp(message, tag, sizeof tag) != 0)
      fail(std::errc::protocol_error, api,
           path + ": the peer sent " + std::to_string(got) + " bytes, not a cuasync unique id", where);
    unique_id id;
    std::memcpy(id.bytes.data(), message + sizeof tag, id.bytes.size());
    while (::send(s.get(), &ack, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }  // a publisher gone by now has nothing left to count
    return id;
  }
}

unique_id exchange_unique_id(int rank, int nranks, const std::string& path, std::chrono::milliseconds timeout,
                             std::source_location where) {
  constexpr const char* api = "cuasync::collectives::exchange_unique_id";
  if (nranks < 1 || rank < 0 || rank >= nranks)
    cuasync::detail::throw_invalid(api, "rank " + std::to_string(rank) + " of " + std::to_string(nranks), where);
  if (rank != 0) return fetch_unique_id(path, timeout, where);
  unique_id id = unique_id::generate(where);
  publish_unique_id(id, path, nranks - 1, timeout, where);
  return id;
}

}  // namespace cuasync::collectives
