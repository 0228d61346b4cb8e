// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/device_runtime.hpp>

#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/detail/grower.hpp>

#include <cstdlib>
#include <cstring>
#include <map>

namespace cuasync::runtime {

namespace {
// Streams whose first non-blocking pageable copy finds its gate word reserved (each later one asks for its own in
// the background, and a stream keeps its word).
constexpr std::size_t gate_words_reserved = 4;
// Event slots a runtime with reserved pageable staging (the C ABI's) makes ready at creation: its first launch
// batches' and copies' events, so that its first operations find their events and host words.
constexpr std::size_t prepared_event_slots = 16;

// CUASYNC_WHOLE_BLOCK_UP_TO_MIB=<n> in the environment: the whole-block bound of every runtime's policy (0: no whole
// blocks, so no large block is allocated in the background for the next copy of a size), for A/B runs of the C ABI.
void whole_block_bound_from_environment(pageable_copy_policy& p) {
  const char* v = std::getenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB");
  if (!v || !*v) return;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(v, &end, 10);
  if (end && *end == '\0' && mib <= (std::size_t{1} << 20)) p.whole_block_up_to_bytes = std::size_t(mib) << 20;
}

bool warm_up_from_environment() {
  static const bool on = [] {
    const char* v = std::getenv("CUASYNC_WARM_UP_STAGING");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}
}  // namespace

device_runtime::device_runtime(primary_context owned, context_ref ctx, device_runtime_options options,
                               std::source_location where)
    : options_(options),
      owned_(owned ? std::make_shared<const primary_context>(std::move(owned)) : nullptr),
      ctx_(ctx) {
  whole_block_bound_from_environment(options_.pageable);
  event_pool::sweep();  // state of contexts that are gone (a new runtime is a good moment to let it go)
  events_ = event_pool::for_context(ctx_, where);
  try {
    set_up(where);
  } catch (...) {
    // What it queued on the grower (its first events' slab, the pinned reservation) ends with it, and the pool it
    // made for the context goes as with a runtime's going: left in the registry, it kept its events and a slab of
    // pinned words until another runtime of the context came and went, or the context's end.
    tear_down(false);
    throw;
  }
  event_pool::runtime_joined(*events_);  // last: a constructor that threw never joined
}

void device_runtime::set_up(std::source_location where) {
  if (options_.admission) events_->set_admission_limits(*options_.admission);
  streams_ = std::make_unique<stream_pool>(ctx_, options_.streams_per_priority, where, owned_);
  pinned_ = std::make_shared<pinned_pool>(ctx_, events_, options_.pinned_cap_bytes, owned_);
  if (properties(where).memory_pools_supported) {
    device_pool_ = memory_pool_ref::device_default(ctx_, where);
    device_pool_.set_release_threshold(options_.device_pool_release_threshold, where);
  }
  if (options_.reserve_pageable_staging) {
    // The first operations' events and host words, on the grower thread before the reservation's allocations (the
    // same thread, in order): no caller's thread allocates pinned memory for them (event_pool::expect_prepare).
    events_->expect_prepare();
    try {
      cuasync::detail::grower_thread().post_or_run(
          [events = events_, where]() mutable {
            events->prepare(prepared_event_slots, where);
            event_pool::let_go(std::move(events));
          });
    } catch (...) {
      events_->prepare(0, where);  // not posted (no memory): the promise withdrawn, the pool grows as it goes
    }
    reserve_pageable_staging();
  }
  if (options_.warm_up_staging || warm_up_from_environment()) warm_up_staging({}, where);
}

void device_runtime::reserve_pageable_staging() noexcept {
  // A plain load first: every C ABI pageable copy asks, and only the first may write the flag.
  if (options_.pageable.cold_chunks == 0 || options_.pageable.chunks_up_to_bytes == 0 ||
      pageable_staging_reserved_.load(std::memory_order_relaxed) ||
      pageable_staging_reserved_.exchange(true, std::memory_order_relaxed))
    return;
  try {
    std::vector<std::size_t> sizes(options_.pageable.cold_chunks * options_.pageable.cold_copies_reserved,
                                   options_.pageable.cold_chunk_bytes);
    sizes.insert(sizes.end(), gate_words_reserved, sizeof(std::uint32_t));
    pinned_->reserve_async(std::move(sizes));
  } catch (...) {
    // No memory for the list: the copies allocate in the background as they go (pinned_pool::warm_async).
  }
  try {
    (void)copy_team();
  } catch (...) {
    // No thread now: the first copy tries again (and reports it).
  }
}

void device_runtime::warm_up_staging(std::vector<std::size_t> pinned_sizes, std::source_location where) {
  staging(where);
  if (!pinned_sizes.empty()) pinned_->reserve_async(std::move(pinned_sizes));
}

device_runtime::~device_runtime() { tear_down(true); }

void device_runtime::tear_down(bool joined) noexcept {
  // Members first (streams, pools), then the context: release owned_ last, then forget pools of dead contexts.
  {
    // cuMemFreeHost and cuMemFree wait for the whole device to be idle, which a kernel that never ends never lets
    // happen: the pools' and the staging ring's frees go to the reaper (held there while the context's awaited
    // operations are on the GPU: event_pool::quiet_in), waited for (bounded) below.
    deferred_until_scope teardown([ctx = ctx_.get()] { return event_pool::quiet_in(ctx); });
    kernels_.reset();
    staging_.reset();
    pinned_.reset();
    streams_.reset();
    // The context's last runtime: its pool's events and host words go before the context (release_if_unused).
    if (joined) {
      event_pool::runtime_left(std::move(events_), ctx_);
    } else {
      events_.reset();
      event_pool::release_if_unused(ctx_);  // left alone while another runtime of the context uses the pool
    }
  }
  // Done within the bound unless the device never goes idle (the context is then abandoned); an adopted context's
  // owner may destroy it once this returns.
  drain_deferred_frees_of(ctx_.get());
  owned_.reset();  // the context goes now, or with the last lease or pinned block that still holds it
  event_pool::sweep();
}

std::shared_ptr<device_runtime> device_runtime::create(int ordinal, device_runtime_options options,
                                                       std::source_location where) {
  primary_context p = primary_context::retain(ordinal, where);
  const context_ref ctx = p;
  return std::shared_ptr<device_runtime>(new device_runtime(std::move(p), ctx, options, where));
}

std::shared_ptr<device_runtime> device_runtime::adopt(context_ref ctx, device_runtime_options options,
                                                      std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::runtime::device_runtime::adopt", "empty context", where);
  return std::shared_ptr<device_runtime>(new device_runtime(primary_context(), ctx, options, where));
}

std::shared_ptr<device_runtime> device_runtime::for_device(int ordinal, std::source_location where) {
  static std::mutex mutex;
  static std::map<int, std::shared_ptr<device_runtime>> runtimes;
  device::get(ordinal, where);  // a clear error for a bad ordinal
  std::lock_guard lock(mutex);
  auto& rt = runtimes[ordinal];
  if (!rt) rt = create(ordinal, {}, where);
  return rt;
}

std::shared_ptr<device_runtime> device_runtime::for_uuid(std::string_view uuid, std::source_location where) {
  return for_device(device::by_uuid(uuid, where).ordinal(), where);
}

staged_copier& device_runtime::staging(std::source_location where) {
  std::call_once(staging_once_,
                 [&] { staging_ = std::make_unique<staged_copier>(ctx_, options_.staging, copy_team(), where); });
  return *staging_;
}

const std::shared_ptr<memcpy_team>& device_runtime::copy_team() {
  std::call_once(team_once_, [&] { team_ = std::make_shared<memcpy_team>(options_.staging.threads); });
  return team_;
}

kernel_cache& device_runtime::kernels(std::source_location where) {
  std::call_once(kernels_once_, [&] { kernels_ = std::make_unique<kernel_cache>(where); });
  return *kernels_;
}

}  // namespace cuasync::runtime
