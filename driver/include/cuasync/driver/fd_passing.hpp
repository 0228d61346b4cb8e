// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Passing a file descriptor to another process over a connected Unix socket (`SCM_RIGHTS`), with a payload
//! that says what it is (for exported device memory: its size and device). The receiver gets its own descriptor of
//! the same open file; the sender keeps and closes its own.

#include <cuasync/driver/unique_fd.hpp>

#include <cstddef>
#include <span>

namespace cuasync {

//! Sends `fd` and `payload` (at least one byte: a stream socket carries the descriptor with the data) over the
//! connected Unix socket `socket` (`socketpair`, or an accepted / connected `AF_UNIX` socket). Blocks until all of
//! the payload is written; never raises SIGPIPE. `fd` stays the caller's.
//! @throws std::system_error with the errno of the failed call (EPIPE: the peer closed its end; EBADF: a bad
//! socket or fd; EINVAL: an empty payload), its message naming the operation.
void send_fd(int socket, int fd, std::span<const std::byte> payload);

//! Receives a descriptor sent by `send_fd` and exactly `payload.size()` bytes of its payload (blocking). The
//! descriptor is opened close-on-exec; the caller owns it.
//! @throws std::system_error (ECONNRESET: the peer closed the socket first; EPROTO: the data came without a
//! descriptor, or the payload's size differs from the sender's on a datagram socket; EBADF: a bad socket).
unique_fd receive_fd(int socket, std::span<std::byte> payload);

}  // namespace cuasync
