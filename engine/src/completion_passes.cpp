// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The passes: which FIFO entries are done. A head pass probes each FIFO's oldest entry (and, in an ordered FIFO,
// searches back from the newest); a full pass, the watchdog's, probes every entry.
#include "completion_queue_entries.hpp"

#include <algorithm>

namespace cuasync {

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
      if (r.status != poll_status::pending && (r.status == poll_status::ready || f.source->failures_in_order())) {
        std::lock_guard lock(mutex_);
        finish_run_locked(f, h.newest->order, r, ps);
        continue;
      }
      if (r.status == poll_status::pending) {
        h.newest->pending_ns = ps.now;
        // Pending: the done prefix (if any) is found with O(log n) queries.
        if (search_ordered(f, h.newest->order, ps)) continue;
      } else {
        h.newest = nullptr;  // failed, the ones before maybe not: each from the head, the newest included
      }
      std::lock_guard lock(mutex_);  // no longer ordered: from the head
      e = f.entries.empty() || f.entries.front() == h.newest ? nullptr : f.entries.front();
    }
    // Entry by entry from the head; stop at the first pending one.
    while (e && e != h.newest) {
      const poll_result r = e->source->query(e->token);
      ++ps.queries;
      if (r.status == poll_status::pending) {
        e->pending_ns = ps.now;
        break;
      }
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
      probe->pending_ns = ps.now;
      if (index == 0) {
        f.head_pending = true;
        return true;  // the oldest is pending: so is everything after it
      }
      bound = probe->order;
      distance *= 2;
      continue;
    }
    if (r.status == poll_status::failed && !f.source->failures_in_order()) return false;  // each from the head
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
        e->pending_ns = ps.now;
        ++i;
        continue;
      }
      std::lock_guard lock(mutex_);
      finish_locked(*f, e, r, ps);
    }
  }
}

void completion_queues::pass(bool full, std::vector<completed_wait>& done, deliver_fn deliver, void* context) {
  std::unique_lock pass_lock(pass_mutex_);
  run_pass(pass_lock, full, done, deliver, context);
}

bool completion_queues::try_pass(std::vector<completed_wait>& done) {
  std::unique_lock pass_lock(pass_mutex_, std::try_to_lock);
  if (!pass_lock.owns_lock()) return false;
  run_pass(pass_lock, false, done, nullptr, nullptr);
  return true;
}

void completion_queues::run_pass(std::unique_lock<std::mutex>& pass_lock, bool full, std::vector<completed_wait>& done,
                                 deliver_fn deliver, void* context) {
  detail::pass_vectors_lease lease;  // no allocation per pass once grown
  detail::pass_vectors& v = lease.get();
  pass_state ps{done, v.done_groups, v.released, v.failed_groups, done.size()};
  ps.now = now_ns();
  if (full) {
    full_pass(ps);  // the watchdog's: every source asked in full (no pass time)
  } else {
    // Sources see the pass's time: a host word still to come is a plain load, its event asked only now and then.
    struct pass_time {
      explicit pass_time(long long now) noexcept { detail::pass_now_ns = now; }
      ~pass_time() { detail::pass_now_ns = 0; }
    } in_pass(ps.now);
    head_pass(ps);
  }
  settle_pass(ps);
  if (deliver) {
    // Still serialised with the other passes, so that a later pass's completions are handed over after these;
    // the places are given back first, as without a hand-over (a handler that issues the next operation finds
    // its room).
    give_tokens_back(ps.released, v.tokens);
    if (done.size() > ps.first_done) deliver(context, done, ps.first_done);
  }
  pass_lock.unlock();
  // Outside the locks: give tokens back (runs of one source at once), drop keep-alives (their destructors may do
  // anything).
  if (!deliver) give_tokens_back(ps.released, v.tokens);
  for (detail::wait_entry* e : ps.released) detail::delete_entry(e);
}

void completion_queues::settle_pass(pass_state& ps) {
  {
    std::vector<completed_wait>& done = ps.done;
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
    if (policy_.predict) update_outlook_locked(ps.now);
  }
}

void completion_queues::give_tokens_back(const std::vector<detail::wait_entry*>& released,
                                         std::vector<std::uintptr_t>& tokens) {
  tokens.reserve(released.size());
  for (std::size_t i = 0; i < released.size();) {
    completion_source* source = released[i]->source;
    tokens.clear();
    std::size_t j = i;
    for (; j < released.size() && released[j]->source == source; ++j) tokens.push_back(released[j]->token);
    source->release_many(tokens);
    i = j;
  }
}

}  // namespace cuasync
