// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Contexts: the device's primary context (retained with RAII), foreign contexts adopted without ownership,
//! and the guard that every entry point uses to make an object's context current only when it is not.

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/driver/error.hpp>

#include <new>
#include <system_error>
#include <utility>

namespace cuasync {

//! A CUDA context that this object does not own. Usable from any thread: entry points make it current as needed.
class context_ref {
 public:
  context_ref() = default;
  context_ref(CUcontext ctx, int device_ordinal) noexcept : ctx_(ctx), device_(device_ordinal) {}

  //! Adopts a context created elsewhere (e.g. by a framework) without taking ownership.
  //! @throws cuda_error for a null or invalid context.
  static context_ref adopt(CUcontext ctx, std::source_location where = std::source_location::current());
  //! The calling thread's current context, or an empty ref when there is none.
  static context_ref current(std::source_location where = std::source_location::current());

  CUcontext get() const noexcept { return ctx_; }
  int device_ordinal() const noexcept { return device_; }
  //! The driver's unique id of this context (`cuCtxGetId`): unlike the handle, never reused by a later context.
  //! @throws cuda_error (e.g. CUDA_ERROR_CONTEXT_IS_DESTROYED)
  unsigned long long id(std::source_location where = std::source_location::current()) const;
  cuasync::device device(std::source_location where = std::source_location::current()) const {
    return cuasync::device::get(device_, where);
  }
  explicit operator bool() const noexcept { return ctx_ != nullptr; }

  //! Host-blocking: waits for all work of every stream in the context. A sledgehammer: prefer waiting on
  //! a stream or an event. Reports a failure that an earlier destructor deferred. @throws cuda_error
  void synchronize(std::source_location where = std::source_location::current()) const;
  //! {least, greatest} stream priority (greatest is numerically smaller).
  std::pair<int, int> stream_priority_range(std::source_location where = std::source_location::current()) const;
  //! Lets this context access `peer`'s memory directly (no-op if already enabled). @throws cuda_error
  void enable_peer_access(context_ref peer, std::source_location where = std::source_location::current()) const;

  //! A failure that a destructor could not throw (`*_nothrow` paths) is kept per context; this returns and clears it.
  std::error_code take_deferred_error() const noexcept;

  friend bool operator==(context_ref a, context_ref b) noexcept { return a.ctx_ == b.ctx_; }

 protected:
  CUcontext ctx_ = nullptr;
  int device_ = -1;
};

//! The device's primary context, retained for this object's lifetime (refcounted by the driver). Move-only.
class primary_context : public context_ref {
 public:
  primary_context() = default;
  //! Retains the primary context of `dev`. @throws cuda_error
  static primary_context retain(cuasync::device dev, std::source_location where = std::source_location::current());
  static primary_context retain(int device_ordinal, std::source_location where = std::source_location::current()) {
    return retain(cuasync::device::get(device_ordinal, where), where);
  }

  primary_context(primary_context&& o) noexcept : context_ref(std::exchange(o.ctx_, nullptr), o.device_) {}
  primary_context& operator=(primary_context&& o) noexcept;
  primary_context(const primary_context&) = delete;
  primary_context& operator=(const primary_context&) = delete;
  ~primary_context();

  //! Gives up ownership: the caller must call `cuDevicePrimaryCtxRelease` itself.
  context_ref release() noexcept { return {std::exchange(ctx_, nullptr), device_}; }
};

//! Makes `ctx` current on this thread for the guard's lifetime when it is not already (a cheap check), and
//! restores the previous context afterwards.
class scoped_context {
 public:
  explicit scoped_context(CUcontext ctx, std::source_location where = std::source_location::current()) {
    const auto& d = detail::driver();
    CUcontext current = nullptr;
    d.cuCtxGetCurrent(&current);
    if (current != ctx) [[unlikely]] {
      detail::check(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent", where);
      pushed_ = true;
    }
  }
  explicit scoped_context(context_ref ctx, std::source_location where = std::source_location::current())
      : scoped_context(ctx.get(), where) {}
  //! For destructors: never throws; `active()` says whether `ctx` is current (it is not when the driver is already
  //! shutting down at process exit, `CUDA_ERROR_DEINITIALIZED`: then there is nothing left to release; `error()`
  //! says why). A push that fails otherwise is tried once more: a destructor that cannot make its context current
  //! leaks what it owns.
  scoped_context(CUcontext ctx, std::nothrow_t) noexcept {
    const auto* d = detail::driver_if_loaded();
    if (!d) {
      failed_ = true;
      error_ = CUDA_ERROR_DEINITIALIZED;
      return;
    }
    CUcontext current = nullptr;
    if (d->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) return;
    for (int attempt = 0; attempt < 2 && !pushed_; ++attempt) {
      error_ = d->cuCtxPushCurrent(ctx);
      pushed_ = error_ == CUDA_SUCCESS;
      if (error_ == CUDA_ERROR_DEINITIALIZED) break;
    }
    failed_ = !pushed_;
  }
  bool active() const noexcept { return !failed_; }
  CUresult error() const noexcept { return error_; }
  ~scoped_context() {
    if (pushed_) {
      CUcontext popped = nullptr;
      detail::driver().cuCtxPopCurrent(&popped);
    }
  }
  scoped_context(const scoped_context&) = delete;
  scoped_context& operator=(const scoped_context&) = delete;

 private:
  bool pushed_ = false;
  bool failed_ = false;
  CUresult error_ = CUDA_SUCCESS;
};

namespace detail {
//! Keeps a failure of `api` (on the object `handle`) in a destructor for `take_deferred_error` and the context's
//! next `synchronize` (first failure per context wins).
void defer_error(CUcontext ctx, CUresult r, const char* api, const void* handle) noexcept;
//! In a destructor: calls `release(driver)` (a driver call releasing `handle`, named `api`) with `ctx` current. A
//! failure that is not sticky is tried once more (a release that failed did nothing, and an object left behind
//! outlives its owner: memory left registered makes the next registration of that address fail); what still fails
//! (the release, or making `ctx` current) is deferred (`defer_error`); at process exit, when the driver is shutting
//! down, nothing is left to release.
template <class Release>
CUresult release_retried(const driver_entry_points& d, Release& release) noexcept {
  CUresult r = release(d);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED && !is_sticky(r) && release(d) == CUDA_SUCCESS)
    r = CUDA_SUCCESS;
  return r;
}
template <class Release>
void release_nothrow(CUcontext ctx, const char* api, const void* handle, Release&& release) noexcept {
  const auto* d = driver_if_loaded();
  if (!d) return;
  scoped_context guard(ctx, std::nothrow);
  if (!guard.active()) {
    if (guard.error() != CUDA_ERROR_DEINITIALIZED) defer_error(ctx, guard.error(), "cuCtxPushCurrent", handle);
    return;
  }
  defer_error(ctx, release_retried(*d, release), api, handle);
}
//! As `release_nothrow` for a release that needs no current context (`cuStreamDestroy`, `cuEventDestroy`,
//! `cuMemPoolDestroy` name their object): the same retry, without making `ctx` current, so such a destructor costs no
//! context check and, after its context ended, still reports its own call's failure.
template <class Release>
void release_nothrow_without_context(CUcontext ctx, const char* api, const void* handle, Release&& release) noexcept {
  if (const auto* d = driver_if_loaded()) defer_error(ctx, release_retried(*d, release), api, handle);
}
//! Throws a deferred failure of `ctx`, if any.
void throw_deferred(CUcontext ctx, const char* api, std::source_location where);
//! Drops what cuasync keeps for a context that is gone (its deferred failure). Never throws.
void forget_context(CUcontext ctx) noexcept;
}  // namespace detail

}  // namespace cuasync
