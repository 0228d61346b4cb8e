// Admission (admission.hpp): places per stream and per context, the queues of operations waiting for one, and the
// hand-over of room when an admitted operation's event completes.
#include "source_state.hpp"

#include <algorithm>
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

admission_site cuda_completion_source::site_of(stream_ref s, std::source_location where) {
  return {event_pool::for_context(s.context(), where), stream_key(s, where), s.get()};
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
  if (stream.waiting || stream.held || !has_room(stream.admitted, pool->limit_stream_.load(std::memory_order_relaxed)))
    return {};
  if (pool->waiting_.load(std::memory_order_acquire) != 0) return {};
  if (!take_context_place(pool->in_flight_, pool->limit_context_.load(std::memory_order_relaxed))) return {};
  ++stream.admitted;
  stream.held = hold;
  return admission_ticket(pool, key, site.stream, hold);
}

void cuda_completion_source::wait_admission(stream_ref s, admission_waiter* w, bool hold,
                                            std::source_location where) {
  std::shared_ptr<event_pool> pool = event_pool::for_context(s.context(), where);
  const std::uint64_t key = stream_key(s, where);
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
  std::vector<std::pair<admission_waiter*, admission_ticket>> admitted;
  try {
    std::lock_guard lock(pool->admission_mutex_);
    const std::uint32_t per_stream = pool->limit_stream_.load(std::memory_order_relaxed);
    const std::uint32_t per_context = pool->limit_context_.load(std::memory_order_relaxed);
    // Streams in turn, one operation each per round, until no stream can take one more.
    for (bool progress = true; progress && !pool->waiting_streams_.empty();) {
      progress = false;
      for (std::size_t n = pool->waiting_streams_.size(); n > 0; --n) {
        const std::uint64_t key = pool->waiting_streams_.front();
        pool->waiting_streams_.pop_front();
        auto it = pool->waiters_.find(key);
        if (it == pool->waiters_.end()) continue;
        std::deque<admission_waiter*>& q = it->second;
        if (!q.empty()) {
          record_shard& shard = st().shard(key);
          std::lock_guard slock(shard.mutex);
          stream_state& stream = shard.streams[key];
          if (!stream.held && has_room(stream.admitted, per_stream) &&
              take_context_place(pool->in_flight_, per_context)) {
            admission_waiter* w = q.front();
            q.pop_front();
            --stream.waiting;
            ++stream.admitted;
            stream.held = w->hold_;
            pool->waiting_.fetch_sub(1, std::memory_order_acq_rel);
            w->pool_.reset();
            admitted.emplace_back(w, admission_ticket(pool, key, w->stream_, w->hold_));
            progress = true;
          }
        }
        if (q.empty())
          pool->waiters_.erase(it);
        else
          pool->waiting_streams_.push_back(key);
      }
    }
  } catch (...) {
    // Out of memory while re-queueing a stream: its waiters stay in waiters_ and are found again next time.
  }
  for (auto& [w, ticket] : admitted) w->admitted(std::move(ticket));
}

void cuda_completion_source::give_place(event_pool& pool, std::uint64_t key, bool hold) noexcept {
  {
    record_shard& shard = st().shard(key);
    std::lock_guard lock(shard.mutex);
    stream_state& stream = shard.streams[key];
    --stream.admitted;
    if (hold) stream.held = false;
    shard.maybe_sweep();
  }
  pool.in_flight_.fetch_sub(1, std::memory_order_acq_rel);
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
  cuda_completion_source::instance().give_place(*pool, stream_key_, std::exchange(hold_, false));
}

}  // namespace cuasync
