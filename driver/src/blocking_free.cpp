// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reaper: a thread of its own that makes the blocking frees of threads that must not block.
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/serial_worker.hpp>
#include <cuasync/trace/hooks.hpp>

#include <cstdlib>
#include <cstring>
#include <utility>

namespace cuasync {

namespace {
thread_local bool marked = false;

bool deferred_everywhere() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("CUASYNC_DEFER_BLOCKING_FREES");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

detail::serial_worker& reaper() {
  static detail::serial_worker& w = detail::serial_worker::make("cuasync-reaper");
  return w;
}

struct free_call {
  CUcontext ctx;
  const char* api;
  const void* handle;
  std::size_t bytes;
  CUresult (*release)(const detail::driver_entry_points&, const void*);
  void operator()() const noexcept {
    trace::host_call hooked(trace::category::alloc, api, bytes);
    detail::release_nothrow(ctx, api, handle, [&](const detail::driver_entry_points& d) { return release(d, handle); });
  }
};
}  // namespace

bool set_thread_must_not_block(bool must_not_block) noexcept { return std::exchange(marked, must_not_block); }
bool thread_must_not_block() noexcept { return marked || deferred_everywhere(); }
void drain_deferred_frees() noexcept { reaper().drain(); }
deferred_free_stats deferred_frees() noexcept { return {reaper().posted(), reaper().ran()}; }

namespace detail {
void release_blocking_nothrow(CUcontext ctx, const char* api, const void* handle, std::size_t bytes,
                              CUresult (*release)(const driver_entry_points&, const void*)) noexcept {
  const free_call f{ctx, api, handle, bytes, release};
  if (thread_must_not_block() && reaper().post(std::function<void()>(f))) return;
  f();
}
}  // namespace detail

}  // namespace cuasync
