// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The instrumentation word, NVTX's switch, and host_call: a host span, an NVTX range and the published blocking
// call, each only when its bit is on.
#include <cuasync/trace/hooks.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/scope.hpp>

#include "watch_slots.hpp"

#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace cuasync::trace {

namespace detail {
std::atomic<std::uint32_t> hooks{0};

struct host_call_state {
  std::uint32_t bits = 0;
  span recorded;                 // with hook::record
  bool nvtx_pushed = false;      // with hook::nvtx
  watch_entry previous;          // with hook::watch: the outer call of this thread, restored at the end
  bool published = false;
};
}  // namespace detail

namespace {
// NVTX on when a tool is attached (Nsight sets NVTX_INJECTION64_PATH) or asked for; the tool sees ranges only then.
bool nvtx_from_environment() noexcept {
  const char* asked = std::getenv("CUASYNC_NVTX");
  if (asked && *asked) return std::strcmp(asked, "0") != 0;
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  return injection && *injection;
}
[[maybe_unused]] const bool nvtx_by_environment = [] {
  if (nvtx_from_environment()) detail::hooks.fetch_or(hook::nvtx, std::memory_order_relaxed);
  return true;
}();

void set_bit(std::uint32_t bit, bool on) noexcept {
  if (on)
    detail::hooks.fetch_or(bit, std::memory_order_relaxed);
  else
    detail::hooks.fetch_and(~bit, std::memory_order_relaxed);
}
}  // namespace

void set_nvtx(bool on) noexcept { set_bit(hook::nvtx, on); }
void set_watch(bool on) noexcept { set_bit(hook::watch, on); }
void set_flight(bool on) noexcept { set_bit(hook::flight, on); }

namespace detail {

void start_host_call(host_call& c, std::uint32_t bits, category cat, const char* call, std::uint64_t bytes,
                     std::uint32_t flags, const std::source_location* where) noexcept {
  try {
    auto state = std::make_unique<host_call_state>();
    state->bits = bits;
    if (bits & hook::record) {
      span& s = state->recorded;
      s.lane = this_thread_lane();
      s.category = cat;
      s.bytes = bytes;
      s.flags = flags;
      s.name = call;
      s.label = current_label();
    }
    if (bits & hook::nvtx) {
      nvtxRangePushA(call);
      state->nvtx_pushed = true;
    }
    if (bits & hook::watch) state->published = publish_call(call, where, state->previous);
    if (bits & hook::record) state->recorded.begin_ns = now_ns();
    c.state_ = state.release();
  } catch (...) {
    // Not instrumented: a hook never throws for the instrumentation's sake.
  }
}

void finish_host_call(host_call& c) noexcept {
  host_call_state& state = *c.state_;
  if (state.bits & hook::record) {
    state.recorded.end_ns = now_ns();
    record(std::move(state.recorded));
  }
  if (state.nvtx_pushed) nvtxRangePop();
  if (state.published) restore_call(std::move(state.previous));
  delete c.state_;
  c.state_ = nullptr;
}

}  // namespace detail
}  // namespace cuasync::trace
