// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Helpers for the async_io tests that run without a GPU: a host completion source and an io_context.
#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/engine/host_completion_source.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <functional>
#include <thread>

namespace cuasync::test {

//! Waits (polling every millisecond) until `pred()` holds or `limit` passes; returns `pred()`.
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

//! In-executor polling with the watchdog out of the way: passes run only when a test runs the io_context or calls
//! poll_once.
inline poll_policy manual_policy() {
  poll_policy p = poll_policy::balanced();
  p.mode = poll_mode::in_executor;
  p.watchdog = std::chrono::hours(1);
  return p;
}

struct host_setup {
  host_completion_source source;
  boost::asio::io_context io;
  completion_service& service = boost::asio::use_service<completion_service>(io);

  wait_target target(std::uintptr_t queue, std::uintptr_t token, std::uintptr_t group = 0,
                     std::shared_ptr<void> keep_alive = nullptr) {
    return {&source, queue, group, token, std::move(keep_alive)};
  }
};

}  // namespace cuasync::test
