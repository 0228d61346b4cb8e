// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Admission (admission.hpp): places per stream and per context, the queues of operations waiting for one, and the
// hand-over of room when an admitted operation's event completes.
#include "source_state.hpp"

#include <cuasync/driver/error.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace cuasync {

using detail::has_room;
using detail::record_shard;
using detail::stream_key;
using detail::stream_state;
using detail::take_context_place;

namespace {
// While release_many runs on this thread: the pools whose waiters get their turn at its end, once each.
thread_local std::vector<std::shared_ptr<event_pool>>* deferred_admissions = nullptr;
}  // namespace

namespace {
// The pools of the streams this thread admitted on lately, by stream id. An id is never reused and a stream's context
// outlives it, so an entry stays right for as long as its stream lives; the pool is held weakly (a cached reference
// must not keep event_pool::release_if_unused from dropping it). Saves the registry's lock and cuCtxGetId per
// operation. The special streams' keys are one per handle across contexts: never cached.
// Direct-mapped by the id's low bits: ids are handed out in sequence, so up to 256 streams created together never
// evict each other (8 entries in turn missed on every operation of a loop over 64 streams: a registry lock and a
// cuCtxGetId each). 6 KiB per thread.
struct site_cache {
  static constexpr std::size_t size = 256;
  struct entry {
    std::uint64_t key = 0;
    std::weak_ptr<event_pool> pool;
  };
  entry entries[size];
  entry& slot(std::uint64_t key) noexcept { return entries[key % size]; }
  std::shared_ptr<event_pool> find(std::uint64_t key) noexcept {
    entry& e = slot(key);
    return e.key == key ? e.pool.lock() : nullptr;
  }
  void put(std::uint64_t key, const std::shared_ptr<event_pool>& pool) noexcept { slot(key) = {key, pool}; }
};
thread_local site_cache recent_sites;
}  // namespace

admission_site cuda_completion_source::site_of(stream_ref s, std::source_location where) {
  const std::uint64_t key = stream_key(s, where);
  if (detail::is_special_stream(s.get())) return {event_pool::for_context(s.context(), where), key, s.get()};
  if (std::shared_ptr<event_pool> pool = recent_sites.find(key)) return {std::move(pool), key, s.get()};
  std::shared_ptr<event_pool> pool = event_pool::for_context(s.context(), where);
  recent_sites.put(key, pool);
  return {std::move(pool), key, s.get()};
}

admission_ticket cuda_completion_source::try_admit(stream_ref s, bool hold, std::source_location where) {
  return try_admit(site_of(s, where), hold);
}

admission_ticket cuda_completion_source::try_admit(const admission_site& site, bool hold) {
  const std::shared_ptr<event_pool>& pool = site.pool;
  const std::uint64_t key = site.stream_key;
  record_shard& shard = st().shard(key);
  std::lock_guard lock(shard.mutex);
  stream_state& stream = shard.streams[key];
  // Nobody overtakes: not those queued on this stream, nor (for the context's room) those queued on others.
  if (stream.waiting || stream.held || stream.granted ||
      !has_room(stream.admitted, pool->limit_stream_.load(std::memory_order_relaxed)))
    return {};
  if (pool->waiting_.load(std::memory_order_acquire) != 0) return {};
  if (!take_context_place(pool->in_flight_, pool->limit_context_.load(std::memory_order_relaxed))) return {};
  ++stream.admitted;
  stream.held = hold;
  return admission_ticket(pool, key, site.stream, hold);
}

namespace {
// Takes up to `n` places in the context's count; how many were taken. At most a quarter of the room left (at least
// one): credits unused on idle streams can never take the context's last places, which keep going to operations
// that enqueue at once (and through them to waiters), so nobody waits on places nobody uses.
std::uint32_t take_context_places(std::atomic<std::uint32_t>& in_flight, std::uint32_t limit, std::uint32_t n) noexcept {
  std::uint32_t cur = in_flight.load(std::memory_order_relaxed);
  std::uint32_t k = 0;
  do {
    k = limit == 0 ? n : (cur < limit ? std::min(n, std::max<std::uint32_t>(1, (limit - cur) / 4)) : 0);
    if (k == 0) return 0;
  } while (!in_flight.compare_exchange_weak(cur, cur + k, std::memory_order_acq_rel, std::memory_order_relaxed));
  return k;
}
}  // namespace

admission_ticket cuda_completion_source::try_admit_n(const admission_site& site, std::uint32_t n) {
  if (n == 0) return {};
  const std::shared_ptr<event_pool>& pool = site.pool;
  const std::uint64_t key = site.stream_key;
  record_shard& shard = st().shard(key);
  std::lock_guard lock(shard.mutex);
  stream_state& stream = shard.streams[key];
  const std::uint32_t per_stream = pool->limit_stream_.load(std::memory_order_relaxed);
  // try_admit's rules: nobody queued on this stream or the context is overtaken, a held or granted stream waits.
  if (stream.waiting || stream.held || stream.granted || !has_room(stream.admitted, per_stream)) return {};
  if (pool->waiting_.load(std::memory_order_acquire) != 0) return {};
  if (per_stream != 0) n = std::min(n, per_stream - stream.admitted);
  const std::uint32_t taken =
      take_context_places(pool->in_flight_, pool->limit_context_.load(std::memory_order_relaxed), n);
  if (taken == 0) return {};
  stream.admitted += taken;
  admission_ticket t(pool, key, site.stream, false);
  t.count_ = taken;
  return t;
}

void cuda_completion_source::wait_admission(stream_ref s, admission_waiter* w, bool hold,
                                            std::source_location where) {
  admission_site site = site_of(s, where);
  std::shared_ptr<event_pool> pool = std::move(site.pool);
  const std::uint64_t key = site.stream_key;
  {
    std::lock_guard lock(pool->admission_mutex_);
    std::deque<admission_waiter*>& q = pool->waiters_[key];
    q.push_back(w);
    if (q.size() == 1) {
      try {
        pool->waiting_streams_.push_back(key);
      } catch (...) {
        q.pop_back();
        throw;
      }
    }
    w->pool_ = pool;
    w->stream_key_ = key;
    w->stream_ = s.get();
    w->hold_ = hold;
    pool->waiting_.fetch_add(1, std::memory_order_acq_rel);
    record_shard& shard = st().shard(key);
    std::lock_guard slock(shard.mutex);
    ++shard.streams[key].waiting;
  }
  admit_waiters(pool);  // room may have appeared since try_admit looked
}

bool cuda_completion_source::cancel_admission(admission_waiter* w) noexcept {
  std::shared_ptr<event_pool> pool = w->pool_;
  if (!pool) return false;
  {
    std::lock_guard lock(pool->admission_mutex_);
    auto it = pool->waiters_.find(w->stream_key_);
    if (it == pool->waiters_.end()) return false;
    auto pos = std::find(it->second.begin(), it->second.end(), w);
    if (pos == it->second.end()) return false;
    it->second.erase(pos);
    pool->waiting_.fetch_sub(1, std::memory_order_acq_rel);
    record_shard& shard = st().shard(w->stream_key_);
    std::lock_guard slock(shard.mutex);
    --shard.streams[w->stream_key_].waiting;
    w->pool_.reset();
  }
  admit_waiters(pool);  // the stream's next waiter may go now
  return true;
}

void cuda_completion_source::admit_waiters(const std::shared_ptr<event_pool>& pool) noexcept {
  std::unique_lock lock(pool->admission_mutex_);
  try {
    const std::uint32_t per_stream = pool->limit_stream_.load(std::memory_order_relaxed);
    const std::uint32_t per_context = pool->limit_context_.load(std::memory_order_relaxed);
    // Streams in turn, one operation each per round, until no stream can take one more. With the context full none
    // can: no stream is looked at (at 100,000 operations waiting, each new waiter's look cost a round of every
    // waiting stream's locks and lookups on the io thread).
    bool context_full = !has_room(pool->in_flight_.load(std::memory_order_relaxed), per_context);
    for (bool progress = true; progress && !context_full && !pool->waiting_streams_.empty();) {
      progress = false;
      for (std::size_t n = pool->waiting_streams_.size(); n > 0 && !context_full; --n) {
        const std::uint64_t key = pool->waiting_streams_.front();
        pool->waiting_streams_.pop_front();
        auto it = pool->waiters_.find(key);
        if (it == pool->waiters_.end()) continue;
        std::deque<admission_waiter*>& q = it->second;
        if (!q.empty()) {
          record_shard& shard = st().shard(key);
          std::lock_guard slock(shard.mutex);
          stream_state& stream = shard.streams[key];
          if (!stream.held && has_room(stream.admitted, per_stream)) {
            pool->granted_.emplace_back();  // may throw: before anything changed
            if (!take_context_place(pool->in_flight_, per_context)) {
              pool->granted_.pop_back();
              context_full = true;
            } else {
              admission_waiter* w = q.front();
              q.pop_front();
              --stream.waiting;
              ++stream.admitted;
              stream.held = w->hold_;
              pool->waiting_.fetch_sub(1, std::memory_order_acq_rel);
              w->pool_.reset();
              admission_ticket ticket(pool, key, w->stream_, w->hold_);
              if (!w->hold_) {  // a holding one keeps the others out by `held` already
                ++stream.granted;
                ticket.granted_ = true;
              }
              pool->granted_.back() = {w, std::move(ticket)};
              progress = true;
            }
          }
        }
        if (q.empty())
          pool->waiters_.erase(it);
        else if (context_full)
          pool->waiting_streams_.push_front(key);  // refused for the context's room: it keeps its turn
        else
          pool->waiting_streams_.push_back(key);
      }
    }
  } catch (...) {
    // Out of memory while re-queueing a stream or growing granted_: its waiters stay in waiters_ and are found
    // again next time.
  }
  // One thread hands places over at a time, in grant order: another thread delivering right now takes these too
  // (and so does this one, for grants a waiter's admitted() makes on its way, e.g. an abandoned operation's place).
  if (pool->handing_over_) return;
  pool->handing_over_ = true;
  std::vector<std::pair<admission_waiter*, admission_ticket>>& delivering = pool->delivering_;
  while (!pool->granted_.empty()) {
    delivering.swap(pool->granted_);  // the two vectors trade capacity: no allocation once grown
    lock.unlock();
    for (auto& [w, ticket] : delivering) w->admitted(std::move(ticket));
    delivering.clear();
    lock.lock();
  }
  pool->handing_over_ = false;
}

void cuda_completion_source::give_place(event_pool& pool, std::uint64_t key, bool hold, bool granted,
                                        std::uint32_t count) noexcept {
  {
    record_shard& shard = st().shard(key);
    std::lock_guard lock(shard.mutex);
    stream_state& stream = shard.streams[key];
    stream.admitted -= count;
    if (hold) stream.held = false;
    if (granted) --stream.granted;
    shard.maybe_sweep();
  }
  places_given(pool, count);
}

void cuda_completion_source::places_given(event_pool& pool, std::uint32_t count) noexcept {
  pool.in_flight_.fetch_sub(count, std::memory_order_acq_rel);
  if (pool.waiting_.load(std::memory_order_acquire) == 0) return;
  if (auto* deferred = deferred_admissions) {
    try {
      for (const auto& p : *deferred)
        if (p.get() == &pool) return;
      deferred->push_back(pool.shared_from_this());
      return;
    } catch (...) {
    }
  }
  admit_waiters(pool.shared_from_this());
}

void cuda_completion_source::release_many(std::span<const std::uintptr_t> tokens) noexcept {
  std::vector<std::shared_ptr<event_pool>> pools;
  deferred_admissions = &pools;
  for (std::uintptr_t t : tokens) release(t);
  deferred_admissions = nullptr;
  for (const auto& p : pools) admit_waiters(p);
}

void cuda_completion_source::settle_grant(std::uint64_t key) noexcept {
  record_shard& shard = st().shard(key);
  std::lock_guard lock(shard.mutex);
  --shard.streams[key].granted;
}

void cuda_completion_source::end_hold(event_pool& pool, std::uint64_t key) noexcept {
  {
    record_shard& shard = st().shard(key);
    std::lock_guard lock(shard.mutex);
    shard.streams[key].held = false;
  }
  if (pool.waiting_.load(std::memory_order_acquire) != 0) admit_waiters(pool.shared_from_this());
}

void admission_ticket::end_hold() noexcept {
  if (!pool_ || !hold_) return;
  hold_ = false;
  cuda_completion_source::instance().end_hold(*pool_, stream_key_);
}

void admission_ticket::reset() noexcept {
  if (!pool_) return;
  std::shared_ptr<event_pool> pool = std::move(pool_);
  cuda_completion_source::instance().give_place(*pool, stream_key_, std::exchange(hold_, false),
                                                std::exchange(granted_, false), std::exchange(count_, 1));
  event_pool::let_go(std::move(pool));
}

admission_ticket admission_ticket::split(std::uint32_t n) {
  if (!pool_ || n == 0 || n >= count_)
    detail::throw_invalid("cuasync::admission_ticket::split",
                          "split " + std::to_string(n) + " of a ticket of " + std::to_string(count()) +
                              " places: take at least one and leave at least one",
                          std::source_location::current());
  admission_ticket t(pool_, stream_key_, stream_, false);
  t.count_ = n;
  count_ -= n;
  return t;
}

void admission_ticket::absorb(admission_ticket&& o) noexcept {
  if (!o.pool_) return;
  if (!pool_) {
    *this = std::move(o);
    return;
  }
  count_ += o.count_;
  o.pool_.reset();  // its places are this ticket's now
  o.count_ = 1;
}

bool admission_ticket::others_waiting() const noexcept {
  return pool_ && pool_->waiting_for_admission() != 0;
}

}  // namespace cuasync
