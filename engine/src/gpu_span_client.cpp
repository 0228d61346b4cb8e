// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU span collector's passes on the engine's poller thread (driver/detail/gpu_span_pump.hpp): while traced
// operations are in flight the poller runs a collector pass every 50 µs beside its completion passes, then lets the
// client go when none are, so a traced process has one polling thread, not two. Installed by the poller at start-up.
#include <cuasync/driver/detail/gpu_span_pump.hpp>
#include <cuasync/engine/poller.hpp>

#include <memory>

namespace cuasync::detail {
namespace {

// The collector reads a span's end within a pass of its completion; 50 µs between passes bounds the clock error as
// the collector's own thread did.
constexpr std::chrono::microseconds span_pass_period{50};

class gpu_span_client final : public poll_client {
 public:
  std::optional<std::chrono::nanoseconds> poller_pass() override {
    if (run_gpu_span_pass()) return std::chrono::nanoseconds(span_pass_period);
    return std::nullopt;
  }
  bool polled_by_thread() const override { return true; }
  bool finished() const override { return gpu_span_pump_idle(); }
};

void start_client() { poller::instance().add(std::make_shared<gpu_span_client>()); }
void poke_poller() noexcept { poller::instance().submitted_unhurried(); }

}  // namespace

void install_gpu_span_pump() noexcept { set_gpu_span_pump({&start_client, &poke_poller}); }

}  // namespace cuasync::detail
