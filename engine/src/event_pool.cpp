// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/detail/context_life.hpp>
#include <cuasync/driver/detail/context_release_hook.hpp>
#include <cuasync/driver/detail/grower.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/stream.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <utility>

namespace cuasync {
namespace {

constexpr std::size_t words_per_slab = 512;

std::atomic<std::size_t> live_count{0};

}  // namespace

// ---- pooled_event

pooled_event& pooled_event::operator=(pooled_event&& o) noexcept {
  if (this != &o) {
    if (slot_) cuda_completion_source::instance().release(reinterpret_cast<std::uintptr_t>(slot_));
    slot_ = std::exchange(o.slot_, nullptr);
    stream_ = o.stream_;
    order_ = o.order_;
    queue_key_ = o.queue_key_;
  }
  return *this;
}

pooled_event::~pooled_event() {
  if (slot_) cuda_completion_source::instance().release(reinterpret_cast<std::uintptr_t>(slot_));
}

event_ref pooled_event::event() const noexcept {
  return slot_ ? event_ref(slot_->event, slot_->pool->context()) : event_ref();
}

poll_result pooled_event::poll() const noexcept {
  if (!slot_) return {poll_status::ready, {}, {}};
  return cuda_completion_source::instance().query(reinterpret_cast<std::uintptr_t>(slot_));
}

bool pooled_event::query(std::source_location where) const {
  const poll_result r = poll();
  if (r.status == poll_status::failed)
    throw cuda_error(r.error, "cuEventQuery", event().describe() + " recorded on " + stream_.describe(), where);
  return r.status == poll_status::ready;
}

void pooled_event::make_wait(stream_ref s, std::source_location where) const {
  if (!slot_) return;
  if (CUresult r = detail::driver().cuStreamWaitEvent(s.get(), slot_->event, 0); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuStreamWaitEvent", s.describe() + " waiting for " + event().describe(), where);
  if (trace::active_hooks() & trace::hook::record) [[unlikely]]
    detail::trace_stream_wait(s);  // the next GPU span on s starts after the wait, not at its call
}

wait_target pooled_event::into_target(std::shared_ptr<void> keep_alive, std::source_location where) && {
  if (!slot_)
    throw cuda_error(make_error_code(CUDA_ERROR_INVALID_HANDLE), "cuasync::pooled_event::into_target",
                     "empty pooled_event (default-constructed or moved from)", where);
  const auto ctx = reinterpret_cast<std::uintptr_t>(stream_.context().get());
  const std::uintptr_t queue = queue_key_ ? queue_key_ : reinterpret_cast<std::uintptr_t>(slot_);
  const std::uint64_t order = order_;
  return {&cuda_completion_source::instance(), queue, ctx, reinterpret_cast<std::uintptr_t>(release()),
          std::move(keep_alive), order};
}

// ---- event_pool

event_pool::event_pool(context_ref ctx, unsigned long long id) : ctx_(ctx), id_(id) {
  live_count.fetch_add(1, std::memory_order_relaxed);
  detail::set_context_release_hook(&event_pool::settle_background);  // a primary release settles this pool's work
}

event_pool::~event_pool() {
  live_count.fetch_sub(1, std::memory_order_relaxed);
  // Every slot is idle (a loan keeps the pool alive). A context that is gone took its events and pinned memory
  // with it: nothing to destroy then.
  const bool alive = context_known_alive_ || !detail::context_life_ended(ctx_.get(), id_);
  for (auto& slot : slots_)
    if (alive) {
      if (const auto* d = detail::driver_if_loaded()) d->cuEventDestroy(slot->event);
    }
  if (!alive)
    for (auto& slab : slabs_) (void)slab.release();
  // The slabs' cuMemFreeHost waits for the whole device to be idle: the reaper makes it, never the thread whose last
  // loan or runtime teardown ends the pool (driver/blocking_free.hpp).
  must_not_block_scope teardown;
  slabs_.clear();
}

void event_pool::settle_background() noexcept {
  std::unique_lock lock(mutex_);
  ++background_epoch_;
  growth_pending_ = false;  // what was asked for will do nothing: a later need asks anew
  if (detail::grower_thread().on_worker()) return;  // the work running is this thread's own, further up
  background_done_.wait(lock, [&] { return !background_running_; });
}

bool event_pool::begin_background_locked(std::uint64_t epoch) noexcept {
  if (epoch != background_epoch_) return false;  // settled since it was asked for
  background_running_ = true;
  return true;
}

void event_pool::end_background_locked() noexcept {
  background_running_ = false;
  background_done_.notify_all();
}

std::size_t event_pool::live_pools() noexcept { return live_count.load(std::memory_order_relaxed); }

void event_pool::learn_words_supported(std::source_location where) {
  if (words_supported_ < 0)
    words_supported_ = ctx_.device(where).attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, where) != 0;
}

detail::event_slot* event_pool::create_slot(std::source_location where) {
  learn_words_supported(where);
  // Doubling, not one more each time (reserve(size + 1) reallocated, and moved every slot, at each new slot).
  if (slots_.size() == slots_.capacity()) slots_.reserve(std::max<std::size_t>(16, 2 * slots_.size()));
  if (idle_.capacity() < slots_.capacity()) idle_.reserve(slots_.capacity());  // give_back never allocates
  event e = event::create(ctx_, {}, where);  // timing disabled
  auto slot = std::make_unique<detail::event_slot>();
  slot->pool = this;
  take_word(*slot);
  slot->event = e.release();
  slots_.push_back(std::move(slot));
  return slots_.back().get();
}

void event_pool::take_word(detail::event_slot& slot) noexcept {
  if (words_supported_ != 1) return;
  const std::size_t capacity = slabs_.size() * words_per_slab;
  if (words_used_ < capacity) {
    const std::size_t i = words_used_++;
    const pinned_buffer& slab = slabs_[i / words_per_slab];
    slot.word = slab.data<std::uint64_t>() + i % words_per_slab;
    slot.word_device = slab_devices_[i / words_per_slab] + (i % words_per_slab) * sizeof(std::uint64_t);
    slot.written = 0;
  }
  // Fewer than a quarter of a slab's words left: the next slab is made on the grower thread, ahead of need. A slot
  // made before it lands has no word (its wait is seen by an event query) and takes one when it comes back.
  if (capacity - words_used_ < words_per_slab / 4 && !growth_pending_) {
    // After a failed growth (no pinned memory, a context going away), not again for a second: a slot made or given
    // back without a word must not send the grower into one failing allocation after another.
    if (growth_failed_ns_ != 0 && completion_queues::now_ns() - growth_failed_ns_ < 1'000'000'000) return;
    growth_pending_ = true;
    std::weak_ptr<event_pool> self = weak_from_this();
    if (!detail::grower_thread().post([self, epoch = background_epoch_] {
          if (std::shared_ptr<event_pool> pool = self.lock()) {
            pool->grow_in_background(epoch);
            let_go(std::move(pool));
          }
        }))
      growth_pending_ = false;  // the grower has stopped (process exit): the pool stays as it is
  }
}

void event_pool::grow_words(std::source_location where) noexcept {
  std::optional<pinned_buffer> slab;
  CUdeviceptr device = 0;
  try {
    // Relaxed: a capture on another stream of this thread's (none on the grower) must not be invalidated.
    thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED, where);
    slab.emplace(new_slab(where));
    device = slab->device_pointer(where);
  } catch (...) {
    slab.reset();  // out of pinned memory, or the context is gone: slots go on without words (event queries)
  }
  std::lock_guard lock(mutex_);  // a slab not kept (no memory for the lists) is freed after it, at the return
  bool kept = false;
  if (slab) {
    try {
      slabs_.reserve(slabs_.size() + 1);
      slab_devices_.reserve(slabs_.size() + 1);
      slabs_.push_back(std::move(*slab));  // words are handed out in order: a slab at the end adds room
      slab_devices_.push_back(device);
      kept = true;
    } catch (...) {
    }
  }
  growth_failed_ns_ = kept ? 0 : completion_queues::now_ns();
  growth_pending_ = false;
  if (!kept) return;
  for (detail::event_slot* idle : idle_)  // slots made while the slab was coming
    if (!idle->word) take_word(*idle);
}

void event_pool::grow_in_background(std::uint64_t epoch) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!begin_background_locked(epoch)) return;
  }
  grow_words(std::source_location::current());
  std::lock_guard lock(mutex_);
  end_background_locked();
}

pinned_buffer event_pool::new_slab(std::source_location where) const {
  pinned_buffer slab = pinned_buffer::allocate(ctx_, words_per_slab * sizeof(std::uint64_t), where);
  std::memset(slab.get(), 0, slab.size());
  return slab;
}

void event_pool::expect_prepare() noexcept {
  std::lock_guard lock(mutex_);
  growth_pending_ = true;
  prepare_promised_ = true;
  prepare_epoch_ = background_epoch_;
}

void event_pool::prepare(std::size_t slots, std::source_location where) noexcept {
  {
    std::lock_guard lock(mutex_);
    // A promised prepare settled since (its runtime gone, the context maybe going) makes nothing; an unpromised one
    // (a caller's own) runs.
    const bool promised = std::exchange(prepare_promised_, false);
    if (!begin_background_locked(promised ? prepare_epoch_ : background_epoch_)) return;
  }
  struct ends {
    event_pool& pool;
    ~ends() {
      std::lock_guard lock(pool.mutex_);
      pool.end_background_locked();
    }
  } ended{*this};
  bool need_slab = false;
  try {
    std::lock_guard lock(mutex_);
    learn_words_supported(where);
    need_slab = words_supported_ == 1 && words_used_ + slots > slabs_.size() * words_per_slab;
    if (!need_slab) growth_pending_ = false;  // expect_prepare's promise is kept without one
  } catch (...) {
    std::lock_guard lock(mutex_);
    growth_pending_ = false;
  }
  if (need_slab) grow_words(where);  // clears the promise, with or without a slab
  try {
    std::lock_guard lock(mutex_);
    while (idle_.size() < slots) idle_.push_back(create_slot(where));  // create_slot reserved idle_'s room
  } catch (...) {
    // Out of memory or a driver error: the operations that need a slot make it themselves (and say why).
  }
}

detail::event_slot* event_pool::acquire(std::source_location where) {
  detail::event_slot* slot;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      slot = idle_.back();
      idle_.pop_back();
    } else {
      slot = create_slot(where);
    }
  }
  slot->lent = shared_from_this();
  slot->expected = 0;
  slot->word_alone.store(false, std::memory_order_relaxed);
  slot->stream_key = slot->first_seq = 0;
  slot->admit_key = 0;
  return slot;
}

void event_pool::give_back(detail::event_slot* slot) noexcept {
  std::shared_ptr<event_pool> self = std::move(slot->lent);  // the last loan may end the pool: after the lock
  {
    std::lock_guard lock(mutex_);
    if (!slot->word && words_supported_ == 1) [[unlikely]]
      take_word(*slot);  // made while the pool was out of words: one may have come since
    idle_.push_back(slot);  // room reserved at creation (idle_.capacity() >= slots_.capacity())
  }
  let_go(std::move(self));
}

void detail::settle_stream(stream_ref s) noexcept {
  if (const auto* d = detail::driver_if_loaded()) (void)d->cuStreamSynchronize(s.get());
}

pooled_event event_pool::record(stream_ref s, std::source_location where) {
  if (!s) detail::throw_invalid("cuasync::event_pool::record", "empty stream", where);
  detail::event_slot* slot = nullptr;
  try {
    slot = acquire(where);
  } catch (...) {
    detail::settle_stream(s);
    throw;
  }
  if (CUresult r = detail::driver().cuEventRecord(slot->event, s.get()); r != CUDA_SUCCESS) {
    give_back(slot);
    detail::settle_stream(s);
    detail::throw_cu(r, "cuEventRecord", "pooled event on " + s.describe(), where);
  }
  return pooled_event(slot, s, 0, 0);
}

void event_pool::set_admission_limits(admission_limits limits) {
  limit_stream_.store(limits.per_stream, std::memory_order_relaxed);
  limit_context_.store(limits.per_context, std::memory_order_relaxed);
  // Wider bounds may admit operations that wait now.
  if (waiting_.load(std::memory_order_acquire) != 0) cuda_completion_source::instance().admit_waiters(shared_from_this());
}

admission_limits event_pool::get_admission_limits() const {
  return {limit_stream_.load(std::memory_order_relaxed), limit_context_.load(std::memory_order_relaxed)};
}

std::size_t event_pool::created() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

std::size_t event_pool::idle() const {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

}  // namespace cuasync
