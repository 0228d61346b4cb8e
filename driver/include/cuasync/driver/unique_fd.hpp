// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `unique_fd`: an owned POSIX file descriptor, closed when its owner is destroyed (sockets, exported memory).

#include <unistd.h>

#include <utility>

namespace cuasync {

//! Owns one file descriptor (or none: -1). Move-only; a moved-from owner is empty.
class unique_fd {
 public:
  unique_fd() = default;
  //! Takes ownership of `fd` (-1: empty).
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  //! Closes the descriptor; a failing `close` is ignored (the descriptor is gone either way on Linux).
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  //! Gives up ownership: the caller closes the returned descriptor.
  int release() noexcept { return std::exchange(fd_, -1); }
  //! Closes the descriptor held, then owns `fd`.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0 && fd_ != fd) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace cuasync
