#include <cuasync/engine/cuda_completion_source.hpp>

#include <cuasync/driver/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace cuasync {
namespace {

// What the source knows of a stream: its waits (for host words) and its admission places.
struct stream_state {
  std::uint32_t outstanding = 0;  // waits recorded and not yet released
  std::uint64_t recorded = 0;     // waits recorded so far
  bool words = true;              // the last wait recorded alone stayed alone until released: a word pays off
  std::uint32_t admitted = 0;     // admission places held by operations on this stream
  std::uint32_t waiting = 0;      // operations queued for a place on this stream
  bool held = false;              // an admitted operation holds the stream (later ones wait)
  bool idle() const noexcept { return outstanding == 0 && admitted == 0 && waiting == 0 && !held; }
};

// Stream states under one lock per shard (by stream id), so that the numbers of one stream's events follow their
// order on the stream even when threads record concurrently.
struct record_shard {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, stream_state> streams;
  std::size_t sweep_at = 256;
  // Idle streams keep their state, so a stream's next wait allocates nothing; a crowd of them is dropped.
  void maybe_sweep() {
    if (streams.size() <= sweep_at) return;
    std::erase_if(streams, [](const auto& kv) { return kv.second.idle(); });
    sweep_at = std::max<std::size_t>(256, 2 * streams.size());  // amortised: O(1) a release
  }
};

constexpr std::uintptr_t user_event_bit = 1;

// While release_many runs on this thread: the pools whose waiters get their turn at its end, once each.
thread_local std::vector<std::shared_ptr<event_pool>>* deferred_admissions = nullptr;

// One handle, many streams (per context, per thread): the source cannot vouch for order among its waits.
bool is_special_stream(CUstream s) noexcept { return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// The key of a stream's state: its id (never reused, unlike handles); the handle, marked, for the special streams.
std::uint64_t stream_key(stream_ref s) {
  if (is_special_stream(s.get())) return reinterpret_cast<std::uintptr_t>(s.get()) | (std::uint64_t{1} << 62);
  return s.id();
}

bool has_room(std::uint32_t count, std::uint32_t limit) noexcept { return limit == 0 || count < limit; }

// Takes a place in the context's count if there is room.
bool take_context_place(std::atomic<std::uint32_t>& in_flight, std::uint32_t limit) noexcept {
  std::uint32_t cur = in_flight.load(std::memory_order_relaxed);
  do {
    if (!has_room(cur, limit)) return false;
  } while (!in_flight.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  return true;
}

}  // namespace

struct cuda_completion_source::state {
  std::array<record_shard, 16> shards;
  std::atomic<std::uint64_t> next_order{1};
  std::atomic<bool> host_words{true};
  std::atomic<std::uint64_t> word_waits{0};
  record_shard& shard(std::uint64_t key) noexcept { return shards[std::hash<std::uint64_t>()(key) % shards.size()]; }
};

cuda_completion_source& cuda_completion_source::instance() {
  static cuda_completion_source* s = new cuda_completion_source;  // never destroyed: pollers may outlive statics
  return *s;
}

cuda_completion_source::state& cuda_completion_source::st() const {
  static state* p = new state;
  return *p;
}

pooled_event cuda_completion_source::record(stream_ref s, std::source_location where) {
  return record(s, admission_ticket(), where);
}

pooled_event cuda_completion_source::record(stream_ref s, admission_ticket ticket, std::source_location where) {
  if (!s) detail::throw_invalid("cuasync::cuda_completion_source::record", "empty stream", where);
  state& st = this->st();
  const std::shared_ptr<event_pool> pool = event_pool::for_context(s.context());
  detail::event_slot* slot = pool->acquire();
  event_ref ev(slot->event, s.context());
  std::uint64_t order = 0;
  std::uintptr_t queue_key = reinterpret_cast<std::uintptr_t>(s.get());
  try {
    if (is_special_stream(s.get())) {
      ev.record(s, where);
    } else {
      const std::uint64_t id = s.id();
      // Top bit set: never equal to a handle (the special streams are the small values 0x1 and 0x2).
      queue_key = static_cast<std::uintptr_t>(id) | (std::uintptr_t{1} << 63);
      record_shard& shard = st.shard(id);
      std::lock_guard lock(shard.mutex);
      stream_state& stream = shard.streams[id];
      // A wait alone on its stream gets a host word too: seeing it done is then a memory read, where a query of a
      // finished event costs ~1.3 µs (the word's write costs ~0.7 µs more to enqueue than the event alone). Waits
      // that others join before they complete need none (one query of the newest completes them all), so the word
      // is given only while the stream's last lone wait stayed alone (one stream, many in flight: no words).
      const bool first = stream.outstanding == 0;
      if (first && stream.words && slot->word && st.host_words.load(std::memory_order_relaxed)) {
        const std::uint64_t value = slot->written + 1;
        if (CUresult r = detail::driver().cuStreamWriteValue64(s.get(), slot->word_device, value, 0);
            r != CUDA_SUCCESS)
          detail::throw_cu(r, "cuStreamWriteValue64", s.describe(), where);
        slot->written = slot->expected = value;
        st.word_waits.fetch_add(1, std::memory_order_relaxed);
      }
      ev.record(s, where);
      ++stream.outstanding;
      ++stream.recorded;
      slot->stream_key = id;
      slot->first_seq = first ? stream.recorded : 0;
      order = st.next_order.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    slot->expected = 0;
    pool->give_back(slot);
    throw;  // the ticket's place is given back by its destructor
  }
  if (ticket) {
    // The wait takes the place over: given back when its event completes (release). A hold ends here.
    if (ticket.hold_) ticket.end_hold();
    slot->admit_key = ticket.stream_key_;
    ticket.pool_.reset();
  }
  return pooled_event(slot, s, order, queue_key);
}

admission_ticket cuda_completion_source::try_admit(stream_ref s, bool hold) {
  std::shared_ptr<event_pool> pool = event_pool::for_context(s.context());
  const std::uint64_t key = stream_key(s);
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
  return admission_ticket(std::move(pool), key, hold);
}

void cuda_completion_source::wait_admission(stream_ref s, admission_waiter* w, bool hold) {
  std::shared_ptr<event_pool> pool = event_pool::for_context(s.context());
  const std::uint64_t key = stream_key(s);
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
            admitted.emplace_back(w, admission_ticket(pool, key, w->hold_));
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

void cuda_completion_source::use_host_words(bool on) noexcept { st().host_words.store(on, std::memory_order_relaxed); }

std::uint64_t cuda_completion_source::host_word_waits() const noexcept {
  return st().word_waits.load(std::memory_order_relaxed);
}

std::size_t cuda_completion_source::created_events(context_ref ctx) const {
  return event_pool::for_context(ctx)->created();
}

std::size_t cuda_completion_source::idle_events(context_ref ctx) const { return event_pool::for_context(ctx)->idle(); }

wait_target cuda_completion_source::target(event_ref e, std::shared_ptr<void> keep_alive) {
  const auto handle = reinterpret_cast<std::uintptr_t>(e.get());
  return {&instance(), handle, reinterpret_cast<std::uintptr_t>(e.context().get()), handle | user_event_bit,
          std::move(keep_alive)};
}

bool cuda_completion_source::is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_DEINITIALIZED:
      return true;
    default:
      return false;
  }
}

poll_result cuda_completion_source::query(std::uintptr_t token) noexcept {
  CUevent ev;
  if (token & user_event_bit) {
    ev = reinterpret_cast<CUevent>(token & ~user_event_bit);
  } else {
    // The word is written after the work before it, with a fence: reaching the expected value means done.
    const auto& slot = *reinterpret_cast<const detail::event_slot*>(token);
    if (slot.expected != 0 &&
        std::atomic_ref<std::uint64_t>(*slot.word).load(std::memory_order_acquire) >= slot.expected)
      return {poll_status::ready, {}, {}};
    ev = slot.event;
  }
  // Pending word (or none): the event says whether the work is still running or failed (a faulted context never
  // writes the word). cuEventQuery needs no current context (measured on the H200).
  const CUresult r = detail::driver().cuEventQuery(ev);
  if (r == CUDA_ERROR_NOT_READY) return {poll_status::pending, {}, {}};
  if (r == CUDA_SUCCESS) return {poll_status::ready, {}, {}};
  return {poll_status::failed, make_error_code(r), is_sticky(r) ? failure_scope::group : failure_scope::operation};
}

void cuda_completion_source::release(std::uintptr_t token) noexcept {
  if (token == 0 || (token & user_event_bit)) return;
  auto* slot = reinterpret_cast<detail::event_slot*>(token);
  state& st = this->st();
  if (slot->stream_key != 0) {
    record_shard& shard = st.shard(slot->stream_key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.streams.find(slot->stream_key);
    if (it != shard.streams.end()) {
      stream_state& stream = it->second;
      if (slot->first_seq != 0) stream.words = stream.recorded == slot->first_seq;  // nobody joined it
      if (--stream.outstanding == 0) shard.maybe_sweep();
    }
    slot->stream_key = slot->first_seq = 0;
  }
  slot->expected = 0;
  if (const std::uint64_t key = std::exchange(slot->admit_key, 0)) give_place(*slot->pool, key, false);
  slot->pool->give_back(slot);
}

}  // namespace cuasync
