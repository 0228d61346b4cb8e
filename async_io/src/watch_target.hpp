// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to io_watchdog: what it watches of one executor — the executor its heartbeats go through, and the
// heartbeat's times. A service of the executor's execution context empties the target when the context shuts down, so
// nothing is posted to (or kept of) a context that is going away.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace cuasync::detail {

// The last heartbeat of one target: written by the heartbeat handler on the io thread, read by the watchdog's thread.
struct heartbeat_times {
  std::atomic<std::int64_t> posted_ns{0};  // when the heartbeat in flight was posted; 0: none in flight
  std::atomic<std::int64_t> ran_ns{0};     // when the last one ran
  std::atomic<std::uint64_t> ran_on{0};    // on which thread (trace::this_thread_ordinal()); 0: none ran yet
};

class watch_target {
 public:
  // Registers with `ex`'s execution context (a service of it). @throws std::bad_alloc
  static std::shared_ptr<watch_target> of(const boost::asio::any_io_executor& ex);

  // Posts a heartbeat unless one is in flight or the context is gone or stopped. Returns what it found:
  // gone (the context shut down), stopped (a stopped io_context or thread_pool: nothing in flight counts), or
  // running.
  enum class status { gone, stopped, running };
  status beat(std::int64_t now_ns) noexcept;

  const heartbeat_times& times() const noexcept { return *times_; }

  // By the context's service, when the context shuts down: the executor goes, under the lock beat() posts under.
  void forget_context() noexcept;

 private:
  std::mutex mutex_;
  boost::asio::any_io_executor executor_;  // untracked; empty once the context is gone
  boost::asio::detail::io_context_impl* scheduler_ = nullptr;  // asked stopped(): the context's, when it has one
  std::shared_ptr<heartbeat_times> times_ = std::make_shared<heartbeat_times>();  // shared with heartbeats in flight
};

}  // namespace cuasync::detail
