// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Measures whether an io thread is ever blocked: a 1 ms steady_timer ticks on it, and the longest gap between two
// ticks is what a blocking call on that thread would stretch (a framework's other handlers wait as long).
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>

namespace cuasync::test {

class gap_meter {
 public:
  explicit gap_meter(boost::asio::io_context& io) : timer_(io) {}
  void start() {
    last_ = clock::now();
    last_tick_ns_.store(last_.time_since_epoch().count(), std::memory_order_relaxed);
    arm();
  }
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }
  //! The longest time between two ticks (or since the last tick), in milliseconds.
  double longest_ms() const { return std::chrono::duration<double, std::milli>(longest_).count(); }
  int ticks() const { return ticks_; }
  //! When the last tick ran (steady_clock, ns): another thread may read it to see a gap while it lasts.
  long long last_tick_ns() const { return last_tick_ns_.load(std::memory_order_relaxed); }

 private:
  using clock = std::chrono::steady_clock;
  void arm() {
    timer_.expires_after(std::chrono::milliseconds(1));
    timer_.async_wait([this](boost::system::error_code ec) {
      const auto now = clock::now();
      longest_ = std::max(longest_, now - last_);
      last_ = now;
      last_tick_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
      if (ec || stopped_) return;
      ++ticks_;
      arm();
    });
  }
  boost::asio::steady_timer timer_;
  clock::time_point last_{};
  clock::duration longest_{};
  std::atomic<long long> last_tick_ns_{0};
  int ticks_ = 0;
  bool stopped_ = false;
};

}  // namespace cuasync::test
