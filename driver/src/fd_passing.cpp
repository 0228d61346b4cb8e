// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// SCM_RIGHTS over a Unix socket: the descriptor travels with the payload's first byte; the rest of the payload may
// follow in further writes on a stream socket.
#include <cuasync/driver/fd_passing.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace cuasync {

namespace {

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

std::string on_socket(int socket) { return " on socket " + std::to_string(socket); }

// Room for a few descriptors, so that a peer sending more than one is seen (and they are closed), not truncated.
constexpr std::size_t max_fds = 4;
union control_buffer {
  cmsghdr align;
  char bytes[CMSG_SPACE(sizeof(int) * max_fds)];
};

}  // namespace

void send_fd(int socket, int fd, std::span<const std::byte> payload) {
  constexpr const char* api = "cuasync::send_fd: ";
  if (payload.empty())
    fail(EINVAL, std::string(api) + "an empty payload (a stream socket carries the descriptor with at least one byte)");
  iovec iov{const_cast<std::byte*>(payload.data()), payload.size()};
  control_buffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n = 0;
  do n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    fail(errno, std::string(api) + "sendmsg of fd " + std::to_string(fd) + " with a " +
                    std::to_string(payload.size()) + "-byte payload" + on_socket(socket));
  for (std::size_t sent = static_cast<std::size_t>(n); sent < payload.size();) {
    n = ::send(socket, payload.data() + sent, payload.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail(errno, std::string(api) + "send of the payload after " + std::to_string(sent) + " of " +
                      std::to_string(payload.size()) + " bytes" + on_socket(socket));
    sent += static_cast<std::size_t>(n);
  }
}

unique_fd receive_fd(int socket, std::span<std::byte> payload) {
  constexpr const char* api = "cuasync::receive_fd: ";
  if (payload.empty()) fail(EINVAL, std::string(api) + "an empty payload (the descriptor arrives with its bytes)");
  iovec iov{payload.data(), payload.size()};
  control_buffer control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
  ssize_t n = 0;
  do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0) fail(errno, std::string(api) + "recvmsg" + on_socket(socket));
  // Take every descriptor that arrived first, so that none leaks whatever goes wrong below.
  unique_fd fd;
  std::size_t extra = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
      if (!fd) {
        fd.reset(received);
      } else {
        ::close(received);
        ++extra;
      }
    }
  }
  if (n == 0) fail(ECONNRESET, std::string(api) + "the peer closed the connection before sending" + on_socket(socket));
  if (msg.msg_flags & MSG_CTRUNC)
    fail(EPROTO, std::string(api) + "the descriptors sent did not fit (more than " + std::to_string(max_fds) + ")" +
                     on_socket(socket));
  if (msg.msg_flags & MSG_TRUNC)
    fail(EPROTO, std::string(api) + "the peer's message is longer than the " + std::to_string(payload.size()) +
                     "-byte payload expected" + on_socket(socket));
  if (!fd)
    fail(EPROTO, std::string(api) + std::to_string(n) + " bytes arrived without a descriptor" + on_socket(socket));
  if (extra)
    fail(EPROTO, std::string(api) + std::to_string(extra + 1) + " descriptors arrived, expected one" +
                     on_socket(socket));
  for (std::size_t got = static_cast<std::size_t>(n); got < payload.size();) {
    n = ::recv(socket, payload.data() + got, payload.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail(errno, std::string(api) + "recv of the payload after " + std::to_string(got) + " of " +
                      std::to_string(payload.size()) + " bytes" + on_socket(socket));
    if (n == 0)
      fail(ECONNRESET, std::string(api) + "the peer closed the connection after " + std::to_string(got) + " of " +
                           std::to_string(payload.size()) + " payload bytes" + on_socket(socket));
    got += static_cast<std::size_t>(n);
  }
  return fd;
}

}  // namespace cuasync
