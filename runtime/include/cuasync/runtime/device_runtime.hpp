// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `device_runtime`: one object per device that makes the asynchronous-CUDA best practices the default — the primary
//! context (or a framework's context, adopted), non-blocking streams by priority, the context's pooled events, a pinned
//! host caching allocator, the device's stream-ordered memory pool, and staged copies for pageable memory.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/kernel_cache.hpp>
#include <cuasync/runtime/pageable_copy.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/staged_copy.hpp>
#include <cuasync/runtime/stream_pool.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace cuasync::runtime {

struct device_runtime_options {
  std::size_t streams_per_priority = 4;
  std::size_t pinned_cap_bytes = std::size_t{4} << 30;   //!< most pinned memory the pinned pool may hold
  std::uint64_t device_pool_release_threshold = UINT64_MAX;  //!< keep freed device memory for reuse
  staged_copy_options staging;
  //! How pageable copies are staged, by size (runtime/pageable_copy.hpp). `CUASYNC_WHOLE_BLOCK_UP_TO_MIB=<n>` in the
  //! environment sets `whole_block_up_to_bytes` of every runtime (the C ABI's too); 0 turns whole blocks off.
  pageable_copy_policy pageable;
  //! Reserves at creation (`reserve_pageable_staging()`) what a non-blocking pageable copy needs when no pinned block
  //! of its size is idle yet, instead of at the first such copy (so that the first copies do not take the ring, which
  //! holds the stream), the copy threads, and the first operations' events. The C ABI's runtimes turn it on. Off by
  //! default: the ~16 MiB of pinned memory (`allocate_pinned_block`: registered) is freed with `cuMemHostUnregister`,
  //! which waits for the whole device, so a runtime that never copies pageable memory should not pay it (nor its
  //! teardown wait behind running work).
  bool reserve_pageable_staging = false;
  //! Admission bounds for the context's awaited operations (engine/admission.hpp); unset: leave them as they are
  //! (the defaults, or what another user of the context set).
  std::optional<admission_limits> admission;
  //! Creates the staging ring when the runtime is created (`warm_up_staging`), so that the first pageable copy finds
  //! it allocated. `CUASYNC_WARM_UP_STAGING=1` in the environment turns it on for every runtime (the C ABI's too).
  bool warm_up_staging = false;
};

//! Counters of a `device_runtime`.
struct device_runtime_stats {
  std::size_t staged_copies = 0;    //!< pageable copies that went through pinned staging
  std::size_t pageable_copies = 0;  //!< pageable copies handed to the driver (small, or staging turned off)
};

//! One per device; shared (`std::shared_ptr`) and thread-safe.
class device_runtime : public std::enable_shared_from_this<device_runtime> {
 public:
  //! A new runtime for device `ordinal`. @throws cuda_error
  static std::shared_ptr<device_runtime> create(int ordinal, device_runtime_options options = {},
                                                std::source_location where = std::source_location::current());
  //! A new runtime on a context created elsewhere (a framework's), which must outlive it; nothing of the context is
  //! owned. @throws cuda_error
  static std::shared_ptr<device_runtime> adopt(context_ref ctx, device_runtime_options options = {},
                                               std::source_location where = std::source_location::current());
  //! The process-wide runtime of device `ordinal` (on its primary context), created with default options on first
  //! use and kept for the life of the process. @throws cuda_error
  static std::shared_ptr<device_runtime> for_device(int ordinal,
                                                    std::source_location where = std::source_location::current());
  //! The process-wide runtime of the device with UUID `uuid` (`device::by_uuid`): how a multi-GPU program names a
  //! device whatever `CUDA_VISIBLE_DEVICES` did to the ordinals. @throws cuda_error
  static std::shared_ptr<device_runtime> for_uuid(std::string_view uuid,
                                                  std::source_location where = std::source_location::current());
  ~device_runtime();

  context_ref context() const noexcept { return ctx_; }
  const device_properties& properties(std::source_location where = std::source_location::current()) const {
    return ctx_.device(where).properties(where);
  }
  stream_pool& streams() noexcept { return *streams_; }
  //! The context's event pool (the one every user of the context shares).
  const std::shared_ptr<event_pool>& events() noexcept { return events_; }
  const std::shared_ptr<pinned_pool>& pinned() noexcept { return pinned_; }
  memory_pool_ref device_pool() const noexcept { return device_pool_; }
  //! The staging ring for pageable copies (created on first use; its pinned memory is allocated on cuasync's
  //! background thread, and copies wait for it asynchronously). @throws cuda_error
  staged_copier& staging(std::source_location where = std::source_location::current());
  //! Warm-up, returning at once: creates the staging ring (its memory allocated on the background thread) and has
  //! the pinned pool allocate a block of each of `pinned_sizes` there too (what the C ABI's pageable copies of those
  //! sizes take). @throws cuda_error
  void warm_up_staging(std::vector<std::size_t> pinned_sizes = {},
                       std::source_location where = std::source_location::current());
  //! Once per runtime: has the pinned pool allocate on the background thread `pageable.cold_chunks` x
  //! `pageable.cold_copies_reserved` chunks and a few gate words, what the C ABI's non-blocking pageable copies take
  //! when no pinned block of their size is idle, and starts the copy threads here (~0.03 ms each: a first copy's call
  //! would start them otherwise). The C ABI calls it at creation and at every pageable copy (later calls do nothing).
  void reserve_pageable_staging() noexcept;
  //! The host copy threads (`staging.threads` of them) that the staging ring and the C ABI's whole-block and chunk
  //! copies share: started on first use. @throws std::system_error when no thread can be started
  const std::shared_ptr<memcpy_team>& copy_team();
  //! JIT kernels for this device: compiled (or found in the caches) and loaded into this runtime's context once.
  //! Created on first use. @throws jit::cache_error when the cache directory is refused
  kernel_cache& kernels(std::source_location where = std::source_location::current());
  //! Kernel `name` of program `p`, compiled for this device. Blocking on a miss (10 ms – seconds).
  //! @throws as `kernel_cache::kernel`
  kernel_ref kernel(const jit::program& p, std::string_view name, const jit::compile_options& o = {},
                    std::source_location where = std::source_location::current()) {
    return kernels(where).kernel(ctx_, p, name, o, jit::output_request::automatic, where);
  }
  const device_runtime_options& options() const noexcept { return options_; }
  device_runtime_stats stats() const noexcept { return {staged_.load(), pageable_.load()}; }
  //! Counts a pageable copy (runtime copies call this).
  void count_pageable_copy(bool staged) noexcept { (staged ? staged_ : pageable_).fetch_add(1, std::memory_order_relaxed); }

  device_runtime(const device_runtime&) = delete;
  device_runtime& operator=(const device_runtime&) = delete;

 private:
  device_runtime(primary_context owned, context_ref ctx, device_runtime_options options, std::source_location where);
  // Lets go of the members, the event pool and the context, in that order: the destructor's work, and a failed
  // constructor's (`joined` false: the runtime never counted itself among the pool's users).
  void tear_down(bool joined) noexcept;
  // The constructor's steps after the event pool: streams, pools, the reservation and the warm-up (any may throw).
  void set_up(std::source_location where);

  device_runtime_options options_;
  // The primary context's retain (empty for an adopted context), shared with the stream pool's leases and the
  // pinned pool (its blocks): what they hold outlives the runtime without outliving its context.
  std::shared_ptr<const primary_context> owned_;
  context_ref ctx_;
  std::shared_ptr<event_pool> events_;
  std::unique_ptr<stream_pool> streams_;
  std::shared_ptr<pinned_pool> pinned_;
  memory_pool_ref device_pool_;
  std::once_flag team_once_;
  std::shared_ptr<memcpy_team> team_;
  std::once_flag staging_once_;
  std::unique_ptr<staged_copier> staging_;
  std::once_flag kernels_once_;
  std::unique_ptr<kernel_cache> kernels_;
  std::atomic<std::size_t> staged_{0}, pageable_{0};
  std::atomic<bool> pageable_staging_reserved_{false};
};

}  // namespace cuasync::runtime
