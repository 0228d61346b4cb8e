// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The event pools by context: one pool per life of a context (a handle is reused), found by for_context, dropped when
// the context's last runtime goes (release_if_unused, or the last holder after it: let_go) or the context is gone
// (sweep), and what a teardown asks of a context's pool (quiet_in, admitted_in, settle_background).
#include <cuasync/engine/event_pool.hpp>

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/context_life.hpp>
#include <cuasync/driver/error.hpp>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cuasync {
namespace {

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

}  // namespace

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

void event_pool::runtime_joined(event_pool& pool) noexcept {
  std::lock_guard lock(the_registry().mutex);  // drop_if_unused reads runtimes_ and marks under it
  ++pool.runtimes_;
  pool.release_when_unused_.store(false, std::memory_order_relaxed);  // marked by another's going: kept
}

void event_pool::runtime_left(std::shared_ptr<event_pool>&& pool, context_ref ctx) noexcept {
  if (!pool) return;
  bool last = false;
  {
    std::lock_guard lock(the_registry().mutex);
    last = pool->runtimes_ != 0 && --pool->runtimes_ == 0;
  }
  pool.reset();
  if (last) release_if_unused(ctx);
}

void event_pool::settle_background(CUcontext ctx) noexcept {
  std::shared_ptr<event_pool> pool;
  {
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    // A pool a runtime uses is left alone: the runtime keeps its context (a primary context's release, such as
    // device::memory_info's, is then not the last) and settles the pool as it goes.
    if (auto it = r.pools.find(ctx); it != r.pools.end() && it->second.pool && it->second.pool->runtimes_ == 0)
      pool = it->second.pool;
  }
  if (pool) pool->settle_background();  // outside the registry's lock; the reference goes as a plain one
}

void event_pool::drop_if_unused(CUcontext ctx, const event_pool* only, bool known_alive) noexcept {
  std::shared_ptr<event_pool> dropped;  // destroyed after the lock is let go (declared before it)
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  auto it = r.pools.find(ctx);
  if (it == r.pools.end() || !it->second.pool || (only && it->second.pool.get() != only)) return;
  event_pool& p = *it->second.pool;
  if (p.runtimes_ != 0) return;  // a runtime joined since: it lets the pool go when it goes
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
      if (!detail::context_life_ended(it->first, it->second.id)) {
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

}  // namespace cuasync
