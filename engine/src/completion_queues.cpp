// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The queues' bookkeeping: adding and detaching waits, finishing and failing them under the lock, shutting down,
// statistics and the poll policy. The passes that search the FIFOs are in completion_passes.cpp.
#include "completion_queue_entries.hpp"

#include <algorithm>
#include <stdexcept>

namespace cuasync {

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
    const bool new_head = f.entries.empty();
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
    predict_locked(f, e, new_head);
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
  note_activity(e->issue_ns);  // a launch's issue time, read microseconds ago: one clock read less per operation
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
  if (!f.entries.empty() && f.entries.front() == e) {
    f.entries.pop_front();
    if (r.status == poll_status::ready) learn_locked(f, e, ps.now);
  } else {
    f.entries.erase(std::find(f.entries.begin(), f.entries.end(), e));
  }
  take_locked(e, r.status == poll_status::failed ? r.error : std::error_code(), ps);
  ps.released.push_back(e);
  if (r.status == poll_status::failed && r.scope == failure_scope::group) fail_group_locked(e->group, r.error, ps);
}

bool completion_queues::finish_run_locked(fifo& f, std::uint64_t last, const poll_result& r, pass_state& ps) {
  const std::error_code ec = r.status == poll_status::failed ? r.error : std::error_code();
  while (!f.entries.empty() && f.entries.front()->order != 0 && f.entries.front()->order <= last) {
    wait_entry* e = f.entries.front();
    f.entries.pop_front();
    if (!ec) learn_locked(f, e, ps.now);
    take_locked(e, ec, ps);
    ps.released.push_back(e);
  }
  if (r.status == poll_status::failed && r.scope == failure_scope::group) {
    fail_group_locked(f.group, r.error, ps);
    return true;
  }
  return false;
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
