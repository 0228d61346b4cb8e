// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <cuasync/driver/blocking_free.hpp>
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
#include <unordered_map>
#include <utility>

namespace cuasync {
namespace {

constexpr std::size_t words_per_slab = 512;

// The pools, by context handle, with the context's id: a handle can be reused by a later context.
struct registry {
  std::mutex mutex;
  struct entry {
    unsigned long long id = 0;
    std::shared_ptr<event_pool> pool;
  };
  std::unordered_map<CUcontext, entry> pools;
};
registry& the_registry() {
  static registry* r = new registry;  // never destroyed: loans may end during static destruction
  return *r;
}
std::atomic<std::size_t> live_count{0};

bool context_alive(CUcontext ctx, unsigned long long id) noexcept {
  const auto* d = detail::driver_if_loaded();
  unsigned long long now = 0;
  return d && d->cuCtxGetId(ctx, &now) == CUDA_SUCCESS && now == id;
}

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
  const bool alive = context_known_alive_ || context_alive(ctx_.get(), id_);
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

std::shared_ptr<event_pool> event_pool::for_context(context_ref ctx, std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::event_pool::for_context", "empty context", where);
  // The id first, even when the handle is known: a primary context released fully and retained again (or any
  // context created where one was destroyed) has the same handle, and its first life's pool holds events the driver
  // no longer knows. Matching the handle alone handed that pool out until a sweep: records then failed with
  // CUDA_ERROR_INVALID_HANDLE.
  unsigned long long id = 0;
  if (CUresult res = detail::driver().cuCtxGetId(ctx.get(), &id); res != CUDA_SUCCESS)
    detail::throw_cu(res, "cuCtxGetId", "context " + detail::handle_string(ctx.get()) + " of device " +
                                            std::to_string(ctx.device_ordinal()),
                     where);
  registry& r = the_registry();
  {
    std::lock_guard lock(r.mutex);
    if (auto it = r.pools.find(ctx.get()); it != r.pools.end() && it->second.pool && it->second.id == id) {
      event_pool& p = *it->second.pool;
      if (p.release_when_unused_.load(std::memory_order_relaxed))  // in use again: kept
        p.release_when_unused_.store(false, std::memory_order_relaxed);
      return it->second.pool;
    }
  }
  sweep();  // a new context: a good moment to let go of those that are gone
  std::lock_guard lock(r.mutex);
  registry::entry& e = r.pools[ctx.get()];
  if (!e.pool || e.id != id) e = {id, std::shared_ptr<event_pool>(new event_pool(ctx, id))};
  return e.pool;
}

void event_pool::release_if_unused(context_ref ctx) noexcept {
  settle_background(ctx.get());
  drop_if_unused(ctx.get(), nullptr, true);
}

void event_pool::settle_background(CUcontext ctx) noexcept {
  std::shared_ptr<event_pool> pool;
  {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    if (auto it = r.pools.find(ctx); it != r.pools.end()) pool = it->second.pool;
  }
  if (pool) pool->settle_background();  // outside the registry's lock; the reference goes as a plain one
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

void event_pool::drop_if_unused(CUcontext ctx, const event_pool* only, bool known_alive) noexcept {
  std::shared_ptr<event_pool> dropped;  // destroyed after the lock is let go (declared before it)
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.pools.find(ctx);
  if (it == r.pools.end() || !it->second.pool || (only && it->second.pool.get() != only)) return;
  event_pool& p = *it->second.pool;
  const admission_limits defaults;
  if (p.limit_stream_.load() != defaults.per_stream || p.limit_context_.load() != defaults.per_context) return;
  // Nobody can take a new reference meanwhile: they come from the registry, under its lock.
  if (it->second.pool.use_count() != 1 || p.in_flight_.load() != 0 || p.waiting_.load() != 0) {
    // Held by a loan or ticket whose completion is still being delivered (or a slab on its way): left in the
    // registry, its events and pinned words stayed until the context's end (fault injection counted them leaked).
    p.release_when_unused_.store(true, std::memory_order_relaxed);
    return;
  }
  // The entry stays (without its pool): sweep() still sees the context end and forgets what is kept per context.
  p.context_known_alive_ = known_alive;  // a late holder's context may be gone: the destructor asks
  dropped = std::move(it->second.pool);
}

void event_pool::let_go(std::shared_ptr<event_pool>&& pool) noexcept {
  if (!pool || !pool->release_when_unused_.load(std::memory_order_relaxed)) [[likely]] {
    pool.reset();
    return;
  }
  const CUcontext ctx = pool->ctx_.get();
  const event_pool* which = pool.get();
  pool.reset();
  drop_if_unused(ctx, which, false);
}

void event_pool::sweep() noexcept {
  std::vector<std::shared_ptr<event_pool>> dropped;  // destroyed outside the lock
  registry& r = the_registry();
  try {
    std::lock_guard lock(r.mutex);
    for (auto it = r.pools.begin(); it != r.pools.end();) {
      if (context_alive(it->first, it->second.id)) {
        ++it;
        continue;
      }
      detail::forget_context(it->first);
      dropped.push_back(std::move(it->second.pool));
      it = r.pools.erase(it);
    }
  } catch (...) {
  }
}

std::size_t event_pool::live_pools() noexcept { return live_count.load(std::memory_order_relaxed); }

std::uint32_t event_pool::admitted_in(CUcontext ctx) noexcept {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.pools.find(ctx);
  return it == r.pools.end() || !it->second.pool ? 0 : it->second.pool->admitted();
}

bool event_pool::quiet_in(CUcontext ctx) noexcept {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.pools.find(ctx);
  if (it == r.pools.end() || !it->second.pool) return true;
  event_pool& pool = *it->second.pool;
  if (pool.admitted() != 0) return false;
  const auto* d = detail::driver_if_loaded();
  if (!d) return true;
  std::lock_guard pool_lock(pool.mutex_);
  for (const auto& slot : pool.slots_)
    if (std::find(pool.idle_.begin(), pool.idle_.end(), slot.get()) == pool.idle_.end()) {
      // A word alone (its event not recorded for this loan) counts as busy until its wait is released.
      if (slot->word_alone.load(std::memory_order_relaxed) || d->cuEventQuery(slot->event) == CUDA_ERROR_NOT_READY)
        return false;
    }
  return true;
}

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
            bool started;
            {
              std::lock_guard lock(pool->mutex_);
              started = pool->begin_background_locked(epoch);
            }
            if (started) {
              pool->grow_words(std::source_location::current());
              std::lock_guard lock(pool->mutex_);
              pool->end_background_locked();
            }
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
