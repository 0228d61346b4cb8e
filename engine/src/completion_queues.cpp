#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/detail/block_cache.hpp>

#include <algorithm>
#include <stdexcept>

namespace cuasync {
namespace detail {

// A token in a FIFO. Owned by the FIFO until the source says it is done; `wait` is null once the wait was handed
// back (completed or detached).
struct wait_entry {
  completion_source* source = nullptr;
  std::uintptr_t token = 0;
  std::uintptr_t group = 0;
  std::uint64_t order = 0;  // wait_target::order
  std::shared_ptr<void> keep_alive;
  queued_wait* wait = nullptr;
};

namespace {
using entry_cache = block_cache<sizeof(wait_entry)>;

wait_entry* new_entry(wait_target& t, queued_wait* w) {
  void* p = entry_cache::allocate();
  return new (p) wait_entry{t.source, t.token, t.group, t.order, std::move(t.keep_alive), w};
}
void delete_entry(wait_entry* e) noexcept {
  e->~wait_entry();
  entry_cache::free(e);
}
}  // namespace
}  // namespace detail

using detail::wait_entry;

struct completion_queues::fifo {
  completion_source* source = nullptr;
  std::uintptr_t group = 0;
  std::deque<wait_entry*> entries;
  bool listed = false;
  // Every entry has a nonzero order and they are sorted: the newest being done means all are. Reset when empty.
  bool ordered = true;
  // The head was pending when last probed (and initially): the next search checks it first, so that a FIFO of long
  // waits costs two queries a pass however many are pending. Otherwise the search gallops back from the newest.
  bool head_pending = true;
};

// What one pass collects: completions, entries to release, groups that failed, queries made.
struct completion_queues::pass_state {
  std::vector<completed_wait>& done;
  std::vector<std::uintptr_t> done_groups;  // parallel to the entries this pass appended to `done`
  std::vector<wait_entry*> released;
  std::vector<std::pair<std::uintptr_t, std::error_code>> failed_groups;
  std::size_t first_done;
  std::uint64_t queries = 0;
  bool group_failed = false;
};

std::size_t completion_queues::key_hash::operator()(
    const std::pair<completion_source*, std::uintptr_t>& k) const noexcept {
  return std::hash<std::uintptr_t>()(k.second) ^ (std::hash<const void*>()(k.first) << 1);
}

completion_queues::completion_queues(poll_policy policy) : policy_(policy), last_watchdog_ns_(now_ns()) {
  note_activity();
}

completion_queues::~completion_queues() {
  for (auto& [key, f] : queues_)
    for (wait_entry* e : f->entries) {
      e->source->release(e->token);
      detail::delete_entry(e);
    }
}

bool completion_queues::add(wait_target t, queued_wait* w) {
  if (!t.source) throw std::invalid_argument("cuasync::completion_queues::add: no completion source");
  wait_entry* e = detail::new_entry(t, w);
  std::unique_lock lock(mutex_);
  if (shut_down_) {
    lock.unlock();
    e->source->release(e->token);
    detail::delete_entry(e);
    return false;
  }
  try {
    std::unique_ptr<fifo>& slot = queues_[{t.source, t.queue}];
    if (!slot) {
      slot = std::make_unique<fifo>();
      slot->source = t.source;
      slot->group = t.group;
    }
    fifo& f = *slot;
    if (!f.listed) {
      active_.push_back(&f);
      f.listed = true;
    }
    if (f.entries.empty()) f.ordered = true;
    if (e->order == 0) f.ordered = false;
    if (!f.ordered || f.entries.empty() || f.entries.back()->order < e->order) {
      f.entries.push_back(e);
    } else {
      // Recorded before entries already queued (a lazily started wait): keep the FIFO in recording order.
      auto pos = std::upper_bound(f.entries.begin(), f.entries.end(), e->order,
                                  [](std::uint64_t o, const wait_entry* x) { return o < x->order; });
      f.entries.insert(pos, e);
    }
  } catch (...) {
    lock.unlock();
    e->wait = nullptr;
    e->source->release(e->token);  // the caller's token: it is never polled, so it is handed back at once
    detail::delete_entry(e);
    throw;
  }
  w->entry = e;
  ++stats_.pending_operations;
  ++stats_.pending_tokens;
  note_activity();
  return true;
}

bool completion_queues::detach(queued_wait* w) noexcept {
  std::lock_guard lock(mutex_);
  if (!w->entry) return false;  // already handed back: completion wins, exactly once
  w->entry->wait = nullptr;
  w->entry = nullptr;
  --stats_.pending_operations;
  return true;
}

void completion_queues::take_locked(wait_entry* e, std::error_code ec, pass_state& ps) {
  --stats_.pending_tokens;
  if (queued_wait* w = std::exchange(e->wait, nullptr)) {
    w->entry = nullptr;
    --stats_.pending_operations;
    ++(ec ? stats_.failed : stats_.completed);
    ps.done.push_back({w, ec});
    ps.done_groups.push_back(e->group);
  }
}

void completion_queues::fail_group_locked(std::uintptr_t group, std::error_code ec, pass_state& ps) {
  ps.failed_groups.emplace_back(group, ec);
  ps.group_failed = true;
  for (fifo* f : active_) {
    if (f->group != group) continue;
    for (wait_entry* e : f->entries) {
      take_locked(e, ec, ps);
      ps.released.push_back(e);
    }
    f->entries.clear();
  }
}

void completion_queues::finish_locked(fifo& f, wait_entry* e, const poll_result& r, pass_state& ps) {
  // Usually the head; an entry inserted before it since the snapshot (sorted insertion) moves it back.
  if (!f.entries.empty() && f.entries.front() == e)
    f.entries.pop_front();
  else
    f.entries.erase(std::find(f.entries.begin(), f.entries.end(), e));
  take_locked(e, r.status == poll_status::failed ? r.error : std::error_code(), ps);
  ps.released.push_back(e);
  if (r.status == poll_status::failed && r.scope == failure_scope::group) fail_group_locked(e->group, r.error, ps);
}

bool completion_queues::finish_run_locked(fifo& f, std::uint64_t last, const poll_result& r, pass_state& ps) {
  const std::error_code ec = r.status == poll_status::failed ? r.error : std::error_code();
  while (!f.entries.empty() && f.entries.front()->order != 0 && f.entries.front()->order <= last) {
    wait_entry* e = f.entries.front();
    f.entries.pop_front();
    take_locked(e, ec, ps);
    ps.released.push_back(e);
  }
  if (r.status == poll_status::failed && r.scope == failure_scope::group) {
    fail_group_locked(f.group, r.error, ps);
    return true;
  }
  return false;
}

// Entries are only removed by passes (serialised by pass_mutex_) and FIFOs only unlisted by them, so the snapshot's
// entries stay valid without the lock, except after a group failure, which empties other FIFOs.
void completion_queues::head_pass(pass_state& ps) {
  {
    std::lock_guard lock(mutex_);
    heads_.clear();
    for (fifo* f : active_)
      if (!f->entries.empty())
        heads_.push_back({f, f->entries.front(), f->ordered && f->entries.size() > 1 ? f->entries.back() : nullptr});
  }
  for (head& h : heads_) {
    fifo& f = *h.f;
    if (ps.group_failed) {
      std::lock_guard lock(mutex_);
      if (f.entries.empty()) continue;
      h = {&f, f.entries.front(), f.ordered && f.entries.size() > 1 ? f.entries.back() : nullptr};
    }
    wait_entry* e = h.oldest;
    if (h.newest) {
      // Ordered: one query of the newest answers for every entry recorded before it.
      const poll_result r = h.newest->source->query(h.newest->token);
      ++ps.queries;
      if (r.status != poll_status::pending) {
        std::lock_guard lock(mutex_);
        finish_run_locked(f, h.newest->order, r, ps);
        continue;
      }
      // Pending: the done prefix (if any) is found with O(log n) queries.
      if (search_ordered(f, h.newest->order, ps)) continue;
      std::lock_guard lock(mutex_);  // no longer ordered: from the head
      e = f.entries.empty() || f.entries.front() == h.newest ? nullptr : f.entries.front();
    }
    // Entry by entry from the head; stop at the first pending one.
    while (e && e != h.newest) {
      const poll_result r = e->source->query(e->token);
      ++ps.queries;
      if (r.status == poll_status::pending) break;
      std::lock_guard lock(mutex_);
      finish_locked(f, e, r, ps);
      e = f.entries.empty() ? nullptr : f.entries.front();
    }
  }
}

bool completion_queues::search_ordered(fifo& f, std::uint64_t bound, pass_state& ps) {
  // A query of finished work costs ~10x one of pending work (1.26 against 0.11 µs on the H200), so the search makes
  // one finished query per FIFO and pass: it gallops back from the pending newest (pending probes are cheap) to the
  // first finished one, completes everything up to it and leaves the few between for the next pass. When the head
  // was pending at the last probe it is checked first: a FIFO of long waits then costs two queries a pass, however
  // many are pending (poll-pass cost grows with streams only).
  // Waits added meanwhile may be inserted anywhere (sorted), hence the position is recomputed from `bound` each time.
  std::size_t distance = 1;
  bool head_first = f.head_pending;
  for (;;) {
    wait_entry* probe;
    std::size_t index;
    {
      std::lock_guard lock(mutex_);
      if (!f.ordered) return false;
      const auto end = std::lower_bound(f.entries.begin(), f.entries.end(), bound,
                                        [](const wait_entry* x, std::uint64_t o) { return x->order < o; });
      const auto unknown = static_cast<std::size_t>(end - f.entries.begin());
      if (unknown == 0) return true;
      index = head_first ? 0 : (unknown > distance ? unknown - distance : 0);
      probe = f.entries[index];
    }
    const poll_result r = probe->source->query(probe->token);
    ++ps.queries;
    if (r.status == poll_status::pending) {
      if (index == 0) {
        f.head_pending = true;
        return true;  // the oldest is pending: so is everything after it
      }
      bound = probe->order;
      distance *= 2;
      continue;
    }
    std::lock_guard lock(mutex_);
    f.head_pending = false;
    finish_run_locked(f, probe->order, r, ps);
    if (r.status == poll_status::failed || !head_first) return true;  // the next pass looks at the rest
    head_first = false;  // the head was done: gallop back from the pending bound to where the run ends
  }
}

// Every entry of every FIFO (the watchdog: a token that finished out of queue order).
void completion_queues::full_pass(pass_state& ps) {
  {
    std::lock_guard lock(mutex_);
    full_scratch_.assign(active_.begin(), active_.end());
  }
  for (fifo* f : full_scratch_) {
    std::size_t i = 0;
    for (;;) {
      wait_entry* e;
      {
        std::lock_guard lock(mutex_);
        if (i >= f->entries.size()) break;
        e = f->entries[i];
      }
      const poll_result r = e->source->query(e->token);
      ++ps.queries;
      if (r.status == poll_status::pending) {
        ++i;
        continue;
      }
      std::lock_guard lock(mutex_);
      finish_locked(*f, e, r, ps);
    }
  }
}

void completion_queues::pass(bool full, std::vector<completed_wait>& done) {
  pass_state ps{done, {}, {}, {}, done.size()};
  {
    std::lock_guard pass_lock(pass_mutex_);
    if (full)
      full_pass(ps);
    else
      head_pass(ps);
    std::lock_guard lock(mutex_);
    // A context fault aborts all of its work: an event on another stream of that context can then read as complete
    // (seen on the H200: a long kernel's event answered CUDA_SUCCESS beside the faulting stream's
    // CUDA_ERROR_ILLEGAL_ADDRESS). Whatever of a failed group completed in the same pass did not really succeed.
    for (std::size_t i = 0; i < ps.done_groups.size() && !ps.failed_groups.empty(); ++i) {
      completed_wait& d = done[ps.first_done + i];
      if (d.error) continue;
      for (const auto& [group, ec] : ps.failed_groups)
        if (ps.done_groups[i] == group) {
          d.error = ec;
          --stats_.completed;
          ++stats_.failed;
          break;
        }
    }
    ++stats_.passes;
    stats_.queries += ps.queries;
    std::erase_if(active_, [](fifo* f) {
      if (!f->entries.empty()) return false;
      f->listed = false;
      return true;
    });
    // Drained FIFOs stay in the map for the next wait on their stream; a crowd of idle ones is dropped.
    if (queues_.size() > active_.size() + 64)
      std::erase_if(queues_, [](const auto& kv) { return !kv.second->listed; });
    if (!ps.released.empty()) note_activity();
  }
  // Outside the locks: give tokens back (runs of one source at once), drop keep-alives (their destructors may do
  // anything).
  std::vector<std::uintptr_t> tokens;
  tokens.reserve(ps.released.size());
  for (std::size_t i = 0; i < ps.released.size();) {
    completion_source* source = ps.released[i]->source;
    tokens.clear();
    std::size_t j = i;
    for (; j < ps.released.size() && ps.released[j]->source == source; ++j) tokens.push_back(ps.released[j]->token);
    source->release_many(tokens);
    for (; i < j; ++i) detail::delete_entry(ps.released[i]);
  }
}

std::vector<queued_wait*> completion_queues::shut_down() {
  std::vector<queued_wait*> waits;
  std::lock_guard pass_lock(pass_mutex_);  // waits for a pass in progress on another thread
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (fifo* f : active_)
    for (wait_entry* e : f->entries)
      if (queued_wait* w = std::exchange(e->wait, nullptr)) {
        w->entry = nullptr;
        waits.push_back(w);
      }
  stats_.pending_operations = 0;
  return waits;
}

bool completion_queues::is_shut_down() const {
  std::lock_guard lock(mutex_);
  return shut_down_;
}

bool completion_queues::empty() const {
  std::lock_guard lock(mutex_);
  return active_.empty();
}

void completion_queues::count_failed_start() noexcept {
  std::lock_guard lock(mutex_);
  ++stats_.failed;
}
void completion_queues::count_aborted() noexcept {
  std::lock_guard lock(mutex_);
  ++stats_.aborted;
}
void completion_queues::count_executor_pass() noexcept {
  std::lock_guard lock(mutex_);
  ++stats_.executor_passes;
}
void completion_queues::count_handoff() noexcept {
  std::lock_guard lock(mutex_);
  ++stats_.handoffs;
}
void completion_queues::count_batches(std::size_t n) noexcept {
  std::lock_guard lock(mutex_);
  stats_.batches += n;
}

void completion_queues::set_policy(const poll_policy& p) {
  std::lock_guard lock(mutex_);
  policy_ = p;
  note_activity();
}

poll_policy completion_queues::policy() const {
  std::lock_guard lock(mutex_);
  return policy_;
}

std::chrono::nanoseconds completion_queues::next_delay() const {
  std::lock_guard lock(mutex_);
  return policy_.next_delay(since_activity());
}

bool completion_queues::watchdog_due() {
  std::lock_guard lock(mutex_);
  const long long now = now_ns();
  if (now - last_watchdog_ns_ < policy_.watchdog.count()) return false;
  last_watchdog_ns_ = now;
  return true;
}

completion_statistics completion_queues::stats() const {
  std::lock_guard lock(mutex_);
  completion_statistics s = stats_;
  s.active_queues = active_.size();
  return s;
}

}  // namespace cuasync
