// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/context_life.hpp>
#include <cuasync/driver/detail/context_release_hook.hpp>
#include <cuasync/trace/hooks.hpp>
#include "gpu_span_collector.hpp"

#include <atomic>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace cuasync {

using detail::check;
using detail::driver;

namespace {
struct deferred_failure {
  CUresult result;
  const char* api;          // the release call that failed (a literal)
  const void* handle;       // what it released
  unsigned long long life;  // the context's id (cuCtxGetId) when it failed; 0: unreadable (the context was gone)
};
std::mutex deferred_mutex;
std::unordered_map<CUcontext, deferred_failure>& deferred() {
  // Never destroyed: cuasync's own threads (the grower, the reaper) may free, and fail, while the process exits.
  static auto* m = new std::unordered_map<CUcontext, deferred_failure>;
  return *m;
}

// Asked only where a failure is kept or found, so a context without one never pays for it.
unsigned long long life_of(CUcontext ctx) noexcept { return detail::context_life(ctx); }

// The failure kept for `ctx` if it happened in the context's present life; one of an earlier life is dropped.
// Under deferred_mutex.
std::optional<deferred_failure> take_locked(CUcontext ctx) {
  auto it = deferred().find(ctx);
  if (it == deferred().end()) return std::nullopt;
  const deferred_failure f = it->second;
  deferred().erase(it);
  if (f.life != life_of(ctx)) return std::nullopt;
  return f;
}
}  // namespace

namespace detail {
namespace {
std::atomic<context_release_hook> release_hook{nullptr};
}  // namespace
void set_context_release_hook(context_release_hook hook) noexcept { release_hook.store(hook); }
void run_context_release_hook(CUcontext ctx) noexcept {
  if (const context_release_hook hook = release_hook.load()) hook(ctx);
}
unsigned long long context_life(CUcontext ctx) noexcept {
  unsigned long long id = 0;
  const auto* d = driver_if_loaded();
  if (!d || d->cuCtxGetId(ctx, &id) != CUDA_SUCCESS) return 0;
  return id;
}
bool context_life_ended(CUcontext ctx, unsigned long long life) noexcept {
  unsigned long long id = 0;
  const auto* d = driver_if_loaded();
  if (!d) return true;
  const CUresult r = d->cuCtxGetId(ctx, &id);
  if (r == CUDA_SUCCESS) return id != life;
  return r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_DEINITIALIZED;
}
void defer_error(CUcontext ctx, CUresult r, const char* api, const void* handle) noexcept {
  if (r == CUDA_SUCCESS) return;
  try {
    const unsigned long long life = life_of(ctx);
    std::lock_guard lock(deferred_mutex);
    auto [it, inserted] = deferred().try_emplace(ctx, deferred_failure{r, api, handle, life});
    if (!inserted && it->second.life != life) it->second = {r, api, handle, life};  // the first of this life wins
  } catch (...) {
  }
}
void throw_deferred(CUcontext ctx, const char* api, std::source_location where) {
  std::optional<deferred_failure> f;
  {
    std::lock_guard lock(deferred_mutex);
    if (deferred().empty()) return;
    f = take_locked(ctx);
  }
  if (!f) return;
  throw_cu(f->result, api,
           std::string(f->api) + "(" + handle_string(f->handle) + ") failed in an earlier destructor in context " +
               handle_string(ctx) + " (reported once, here)",
           where);
}
void forget_context(CUcontext ctx) noexcept {
  std::lock_guard lock(deferred_mutex);
  deferred().erase(ctx);
}
}  // namespace detail

unsigned long long context_ref::id(std::source_location where) const {
  unsigned long long id = 0;
  if (CUresult r = driver().cuCtxGetId(ctx_, &id); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxGetId", "context " + detail::handle_string(ctx_) + " of device " + std::to_string(device_),
                     where);
  return id;
}

std::error_code context_ref::take_deferred_error() const noexcept {
  std::lock_guard lock(deferred_mutex);
  if (deferred().empty()) return {};
  const std::optional<deferred_failure> f = take_locked(ctx_);
  return f ? make_error_code(f->result) : std::error_code{};
}

context_ref context_ref::adopt(CUcontext ctx, std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::context_ref::adopt", "null context", where);
  (void)driver(where);  // a failed load names the caller's line
  scoped_context guard(ctx, where);
  CUdevice dev = 0;
  check(driver().cuCtxGetDevice(&dev), "cuCtxGetDevice", where);
  // CUdevice values are ordinals for the driver's enumeration.
  return {ctx, static_cast<int>(dev)};
}

context_ref context_ref::current(std::source_location where) {
  CUcontext ctx = nullptr;
  check(driver(where).cuCtxGetCurrent(&ctx), "cuCtxGetCurrent", where);
  if (!ctx) return {};
  return adopt(ctx, where);
}

void context_ref::synchronize(std::source_location where) const {
  scoped_context guard(ctx_, where);
  trace::host_call hooked(trace::category::sync, "cuCtxSynchronize", 0, trace::flag::device_wide, &where);
  if (CUresult r = driver().cuCtxSynchronize(); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxSynchronize", "context of device " + std::to_string(device_), where);
  detail::throw_deferred(ctx_, "cuasync::context_ref::synchronize", where);
}

std::pair<int, int> context_ref::stream_priority_range(std::source_location where) const {
  scoped_context guard(ctx_, where);
  int least = 0, greatest = 0;
  check(driver().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange", where);
  return {least, greatest};
}

void context_ref::enable_peer_access(context_ref peer, std::source_location where) const {
  scoped_context guard(ctx_, where);
  CUresult r = driver().cuCtxEnablePeerAccess(peer.get(), 0);
  if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return;
  if (r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxEnablePeerAccess",
                     "device " + std::to_string(device_) + " -> device " + std::to_string(peer.device_ordinal()),
                     where);
}

primary_context primary_context::retain(cuasync::device dev, std::source_location where) {
  primary_context p;
  // The first retain creates the context (hundreds of ms): the watchdog names it on an io thread.
  trace::host_call watched(trace::watch_only(), trace::category::sync, "cuDevicePrimaryCtxRetain", 0, 0, &where);
  if (CUresult r = driver().cuDevicePrimaryCtxRetain(&p.ctx_, dev.native_handle()); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuDevicePrimaryCtxRetain", "device " + std::to_string(dev.ordinal()), where);
  p.device_ = dev.ordinal();
  return p;
}

primary_context& primary_context::operator=(primary_context&& o) noexcept {
  if (this != &o) {
    this->~primary_context();
    ctx_ = std::exchange(o.ctx_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

primary_context::~primary_context() {
  if (ctx_) {
    // Frees handed to the reaper are made while the context is alive (this release may be its last), unless its device
    // never goes idle: then the release goes ahead after a bound, and the reaper skips what is left of this life.
    drain_deferred_frees_of(ctx_);
    detail::run_context_release_hook(ctx_);  // the engine's background work for it settled
    detail::forget_context_for_trace(ctx_);
    CUdevice dev = 0;
    if (driver().cuDeviceGet(&dev, device_) == CUDA_SUCCESS) driver().cuDevicePrimaryCtxRelease(dev);
    ctx_ = nullptr;
  }
}

}  // namespace cuasync
