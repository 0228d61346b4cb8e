// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/pinned_pool.hpp>

#include <cuasync/driver/detail/grower.hpp>

#include <cuasync/driver/blocking_free.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

namespace cuasync::runtime {

namespace {
// On unless CUASYNC_PINNED_BY_REGISTRATION=0; off for the rest of the process once the driver refuses a registration
// as unsupported.
std::atomic<bool>& registering() noexcept {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("CUASYNC_PINNED_BY_REGISTRATION");
    return !(v && std::strcmp(v, "0") == 0);
  }()};
  return on;
}
}  // namespace

bool pinned_blocks_registered() noexcept { return registering().load(std::memory_order_relaxed); }

namespace {
// On the grower thread pinned allocations come back to back (a reservation's blocks, the ring's slots, sizes warmed
// one after another), and the driver's lock is not handed over in order: a thread waiting to enqueue got in only
// after the whole run (64 registrations of 2 MiB held it 9.7 ms; with a 100 us pause between them, 0.42 ms; H100,
// bench/results/h100-session23). A pause between two of them keeps another thread's wait to about one allocation.
class background_pacing {
 public:
  background_pacing() noexcept : on_grower_(detail::grower_thread().on_worker()) {
    if (!on_grower_) return;
    const auto since = std::chrono::steady_clock::now() - last_end_;
    if (since < pause) std::this_thread::sleep_for(pause - since);
  }
  ~background_pacing() {
    if (on_grower_) last_end_ = std::chrono::steady_clock::now();
  }
  background_pacing(const background_pacing&) = delete;
  background_pacing& operator=(const background_pacing&) = delete;

 private:
  static constexpr std::chrono::microseconds pause{100};
  static inline thread_local std::chrono::steady_clock::time_point last_end_{};
  bool on_grower_;
};
}  // namespace

pinned_buffer allocate_pinned_block(context_ref ctx, std::size_t bytes, std::source_location where) {
  background_pacing paced;
  if (registering().load(std::memory_order_relaxed)) {
    try {
      return pinned_buffer::allocate_registered(ctx, bytes, where);
    } catch (const cuda_error& e) {
      // Not every host lets memory be registered (some virtual machines, locked-down kernels): cuMemHostAlloc then.
      if (e.result() != CUDA_ERROR_NOT_SUPPORTED && e.result() != CUDA_ERROR_NOT_PERMITTED) throw;
      registering().store(false, std::memory_order_relaxed);
    }
  }
  return pinned_buffer::allocate(ctx, bytes, where);
}

namespace {
constexpr std::size_t min_class = 4096;
std::size_t class_index(std::size_t cls) { return static_cast<std::size_t>(std::countr_zero(cls)); }
// The largest request with a size class (a power of two that fits in size_t).
constexpr std::size_t max_request = (std::numeric_limits<std::size_t>::max() >> 1) + 1;
// `reserved + bytes <= cap`, without the sum overflowing for a huge request.
bool fits(std::size_t reserved, std::size_t bytes, std::size_t cap) { return bytes <= cap && reserved <= cap - bytes; }
}  // namespace

// ---- pinned_block

pinned_block& pinned_block::operator=(pinned_block&& o) noexcept {
  if (this != &o) {
    this->~pinned_block();
    new (this) pinned_block(std::move(o));
  }
  return *this;
}

pinned_block::~pinned_block() {
  if (pool_ && buffer_) pool_->give_back(std::move(buffer_), std::move(uses_));
}

void pinned_block::record_use(stream_ref s, std::source_location where) {
  if (!pool_)
    detail::throw_invalid("cuasync::runtime::pinned_block::record_use", "an empty (or moved-from) block", where);
  uses_.push_back(pool_->events_->record(s, where));
  if (uses_.size() > 8) {
    // Drop uses whose work has completed, so a long-lived block does not grow its list.
    std::erase_if(uses_, [](const pooled_event& u) { return u.poll().status == poll_status::ready; });
  }
}

// ---- pinned_pool

pinned_pool::pinned_pool(context_ref ctx, std::shared_ptr<event_pool> events, std::size_t cap_bytes,
                         std::shared_ptr<const void> context_keeper)
    : context_keeper_(std::move(context_keeper)), ctx_(ctx), events_(std::move(events)), idle_(64) {
  stats_.cap = cap_bytes;
}

pinned_pool::~pinned_pool() {
  // Before context_keeper_ goes: its release waits (bounded) for these frees. Held while awaited operations of the
  // context are on the GPU: cuMemFreeHost would wait for them (forever, behind a kernel that never ends).
  deferred_until_scope teardown([ctx = ctx_.get()] { return event_pool::quiet_in(ctx); });
  idle_.clear();
  pending_.clear();
  // Maybe the pool's last holder (a reservation task on the grower outlived its runtime): a pool its runtime's going
  // left for its last holder goes now, not at the context's end.
  event_pool::let_go(std::move(events_));
}

std::size_t pinned_pool::size_class(std::size_t bytes) noexcept {
  return bytes > max_request ? 0 : std::max(min_class, std::bit_ceil(bytes));
}

std::vector<pinned_buffer>& pinned_pool::idle_for(std::size_t cls) { return idle_[class_index(cls)]; }

void pinned_pool::collect_completed_locked() {
  for (std::size_t i = 0; i < pending_.size();) {
    auto& p = pending_[i];
    bool done = true;
    for (auto& u : p.uses) {
      if (u.poll().status == poll_status::pending) {
        done = false;
        break;
      }
      // An error means the context faulted: the work will never touch the memory again.
    }
    if (!done) {
      ++i;
      continue;
    }
    const std::size_t cls = p.buffer.size();
    stats_.bytes_pending -= cls;
    stats_.bytes_idle += cls;
    idle_for(cls).push_back(std::move(p.buffer));
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void pinned_pool::make_room_locked(std::size_t bytes, std::source_location where) {
  if (fits(stats_.bytes_reserved, bytes, stats_.cap)) return;
  collect_completed_locked();
  // Free idle blocks, largest classes first, until the new block fits.
  for (std::size_t c = idle_.size(); c-- > 0 && !fits(stats_.bytes_reserved, bytes, stats_.cap);) {
    auto& list = idle_[c];
    while (!list.empty() && !fits(stats_.bytes_reserved, bytes, stats_.cap)) {
      stats_.bytes_idle -= list.back().size();
      stats_.bytes_reserved -= list.back().size();
      list.pop_back();  // cuMemFreeHost
    }
  }
  if (!fits(stats_.bytes_reserved, bytes, stats_.cap))
    throw cuda_error(make_error_code(CUDA_ERROR_OUT_OF_MEMORY), "cuasync::runtime::pinned_pool::allocate",
                     "a block of " + std::to_string(bytes) + " bytes would exceed the pool's cap of " +
                         std::to_string(stats_.cap) + " bytes (" + std::to_string(stats_.bytes_in_use) +
                         " in use, " + std::to_string(stats_.bytes_pending) + " still used by GPU work)",
                     where);
}

pinned_block pinned_pool::allocate(std::size_t bytes, std::source_location where) {
  if (bytes == 0) detail::throw_invalid("cuasync::runtime::pinned_pool::allocate", "zero-byte allocation", where);
  if (bytes > max_request)  // no size class (a negative size cast to size_t, typically)
    throw cuda_error(make_error_code(CUDA_ERROR_OUT_OF_MEMORY), "cuasync::runtime::pinned_pool::allocate",
                     "a block of " + std::to_string(bytes) + " bytes (larger than any host memory)", where);
  const std::size_t cls = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    if (pinned_block hit = take_idle_locked(bytes, cls)) return hit;
    make_room_locked(cls, where);
    ++stats_.misses;
    stats_.bytes_reserved += cls;  // reserved before the slow allocation, so concurrent callers respect the cap
    stats_.bytes_in_use += cls;
  }
  try {
    return pinned_block(shared_from_this(), allocate_pinned_block(ctx_, cls, where), bytes);
  } catch (...) {
    std::lock_guard lock(mutex_);
    stats_.bytes_reserved -= cls;
    stats_.bytes_in_use -= cls;
    throw;
  }
}

pinned_block pinned_pool::take_idle_locked(std::size_t bytes, std::size_t cls) {
  auto& list = idle_for(cls);
  if (list.empty() && !pending_.empty()) collect_completed_locked();
  if (list.empty()) return {};
  pinned_buffer b = std::move(list.back());
  list.pop_back();
  ++stats_.hits;
  stats_.bytes_idle -= cls;
  stats_.bytes_in_use += cls;
  return pinned_block(shared_from_this(), std::move(b), bytes);
}

pinned_block pinned_pool::try_allocate(std::size_t bytes) noexcept {
  if (bytes == 0 || bytes > max_request) return {};
  try {
    std::lock_guard lock(mutex_);
    return take_idle_locked(bytes, size_class(bytes));
  } catch (...) {
    return {};  // polling a pending block's event failed to allocate: a miss
  }
}

void pinned_pool::allocate_async(std::size_t bytes, ready_callback ready, std::source_location where) {
  if (pinned_block hit = try_allocate(bytes)) return ready(std::move(hit), nullptr);
  // A miss (or bad input, which allocate names): the slow call, and freeing idle blocks at the cap, run there.
  auto task = [self = shared_from_this(), bytes, ready = std::move(ready), where]() mutable {
    pinned_block b;
    std::exception_ptr failure;
    try {
      b = self->allocate(bytes, where);
    } catch (...) {
      failure = std::current_exception();
    }
    ready(std::move(b), failure);
  };
  cuasync::detail::grower_thread().post_or_run(std::move(task));  // at exit: on the caller's thread
}

void pinned_pool::reserve_async(std::vector<std::size_t> sizes) {
  auto task = [self = shared_from_this(), sizes = std::move(sizes)] {
    std::vector<pinned_block> blocks;  // all held at once, so that equal sizes make distinct blocks
    for (std::size_t n : sizes) {
      try {
        blocks.push_back(self->allocate(n));
      } catch (...) {
      }
    }
  };  // the blocks go back to the pool idle
  cuasync::detail::grower_thread().post_or_run(std::move(task));
}

void pinned_pool::warm_async(std::size_t bytes) noexcept {
  const std::size_t cls = size_class(bytes);
  if (cls == 0) return;
  const std::uint64_t bit = std::uint64_t{1} << class_index(cls);
  {
    std::lock_guard lock(mutex_);
    if ((warming_ & bit) || !idle_for(cls).empty()) return;
    warming_ |= bit;
  }
  auto task = [self = shared_from_this(), bytes, bit] {
    try {
      self->allocate(bytes);  // dropped at once: idle
    } catch (...) {
    }
    std::lock_guard lock(self->mutex_);
    self->warming_ &= ~bit;
  };
  try {
    cuasync::detail::grower_thread().post_or_run(std::move(task));
  } catch (...) {
    std::lock_guard lock(mutex_);
    warming_ &= ~bit;
  }
}

void pinned_pool::give_back(pinned_buffer b, std::vector<pooled_event> uses) noexcept {
  try {
    std::lock_guard lock(mutex_);
    const std::size_t cls = b.size();
    stats_.bytes_in_use -= cls;
    if (uses.empty()) {
      stats_.bytes_idle += cls;
      idle_for(cls).push_back(std::move(b));
    } else {
      stats_.bytes_pending += cls;
      pending_.push_back({std::move(b), std::move(uses)});
    }
  } catch (...) {
    // No memory for the lists: the buffer is freed by its destructor. That is only safe once its work is done.
    for (auto& u : uses) detail::driver().cuEventSynchronize(u.event().get());
  }
}

void pinned_pool::trim() {
  std::lock_guard lock(mutex_);
  collect_completed_locked();
  for (auto& list : idle_) {
    for (auto& b : list) stats_.bytes_reserved -= b.size();
    list.clear();
  }
  stats_.bytes_idle = 0;
}

pinned_pool_stats pinned_pool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace cuasync::runtime
