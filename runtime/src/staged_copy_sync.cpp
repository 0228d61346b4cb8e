// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The staged copier's synchronous forms: they start the asynchronous copy with a callback of their own and wait for
// its `enqueued` (host to device) or `done` (device to host), copying the team's parts meanwhile (caller_copies).
#include <cuasync/runtime/staged_copy.hpp>

#include <cuasync/runtime/memcpy_team.hpp>

#include <cuasync/trace/hooks.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace cuasync::runtime {

namespace {
constexpr const char* to_device_api = "cuasync::runtime::staged_copier::copy_to_device";
constexpr const char* to_host_api = "cuasync::runtime::staged_copier::copy_to_host";

// The synchronous forms: wait for `enqueued` (H2D) or `done` (D2H). Shared with the copy, which may outlive the wait
// (an H2D copy returns once enqueued).
struct sync_wait final : staged_copy_callback {
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    bool enqueued = false, done = false;
    std::error_code error;
    std::exception_ptr detail;
  };
  std::shared_ptr<state> st = std::make_shared<state>();
  void enqueued() noexcept override {
    std::lock_guard lock(st->mutex);
    st->enqueued = true;
    st->cv.notify_all();
  }
  void done(std::error_code ec, std::exception_ptr detail) noexcept override {
    std::shared_ptr<state> keep = st;
    delete this;
    std::lock_guard lock(keep->mutex);
    keep->done = true;
    keep->error = ec;
    keep->detail = detail;
    keep->cv.notify_all();
  }
};

// Waits; with `helper`, the waiting thread copies the team's parts while there are any (its own copy's first: they
// are the oldest, unless other copies' came first), and looks for more every 100 us (a D2H copy's host side comes
// one chunk at a time, after each DMA).
void wait_for(const std::shared_ptr<sync_wait::state>& st, bool until_done, const char* api, stream_ref s,
              const std::shared_ptr<memcpy_team>& helper, std::source_location where) {
  const auto ready = [&] { return st->done || (!until_done && st->enqueued); };
  std::unique_lock lock(st->mutex);
  while (!ready()) {
    if (!helper) {
      st->cv.wait(lock, ready);
      break;
    }
    lock.unlock();
    const bool helped = helper->help_one();
    lock.lock();
    if (!helped) st->cv.wait_for(lock, std::chrono::microseconds(100), ready);
  }
  if (st->done && st->error) {
    if (st->detail) std::rethrow_exception(st->detail);  // names the call that failed
    throw cuda_error(st->error, api, "staged copy on " + s.describe(), where);
  }
}
}  // namespace

void staged_copier::copy_to_device(stream_ref s, device_span dst, std::span<const std::byte> src,
                                   std::source_location where) {
  trace::host_call watched(trace::watch_only(), trace::category::sync, "staged_copier::copy_to_device", dst.size, 0,
                           &where);
  auto* w = new sync_wait;
  std::shared_ptr<sync_wait::state> st = w->st;
  try {
    start_to_device(s, dst, src, w, where);
  } catch (...) {
    delete w;
    throw;
  }
  wait_for(st, false, to_device_api, s, options_.caller_copies ? team_ : nullptr, where);
}

void staged_copier::copy_to_host(stream_ref s, std::span<std::byte> dst, device_span src,
                                 std::source_location where) {
  trace::host_call watched(trace::watch_only(), trace::category::sync, "staged_copier::copy_to_host", src.size, 0,
                           &where);
  auto* w = new sync_wait;
  std::shared_ptr<sync_wait::state> st = w->st;
  try {
    start_to_host(s, dst, src, w, where);
  } catch (...) {
    delete w;
    throw;
  }
  wait_for(st, true, to_host_api, s, options_.caller_copies ? team_ : nullptr, where);
}

}  // namespace cuasync::runtime
