// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The queues' predicted ends: what a wait's work key predicts at add, what a head seen done teaches, and the outlook
// (the earliest predicted end, and whether any pending head has none) that the poll schedule is computed from.
#include "completion_queue_entries.hpp"

#include <algorithm>

namespace cuasync {

namespace {
long long start_of(const wait_entry* e, long long last_done_ns) noexcept {
  return std::max(e->issue_ns, last_done_ns);
}
}  // namespace

void completion_queues::predict_locked(fifo& f, wait_entry* e, bool new_head) noexcept {
  if (policy_.predict && e->work_key) {
    if (e->issue_ns == 0) e->issue_ns = now_ns();
    e->predicted_ns = predictor_.predict(e->work_key);
  }
  if (e->predicted_ns) ++stats_.predicted;
  if (!new_head) return;  // its FIFO's head decides when the FIFO is next worth a look
  if (!e->predicted_ns) {
    unpredicted_ = true;
    return;
  }
  const long long end = start_of(e, f.last_done_ns) + e->predicted_ns;
  if (earliest_end_ns_ == 0 || end < earliest_end_ns_) {
    earliest_end_ns_ = end;
    earliest_duration_ns_ = e->predicted_ns;
  }
}

void completion_queues::learn_locked(fifo& f, wait_entry* e, long long now) noexcept {
  // Only a head teaches: its start is known (its issue, or when the one before it was seen done), and the pass
  // that last found it pending bounds its end from below. One found done at the first look teaches too (pending
  // from its start, done by now): without it only the slow ones would teach, and one descheduled run would stand
  // for a key whose other runs all end before the first pass.
  if (e->work_key) {
    const long long start = start_of(e, f.last_done_ns);
    const long long lo = e->pending_ns >= start ? e->pending_ns : start;
    if (now >= lo) predictor_.observe(e->work_key, lo - start, now - start);
  }
  f.last_done_ns = now;
}

void completion_queues::update_outlook_locked(long long now) noexcept {
  earliest_end_ns_ = earliest_duration_ns_ = overrun_from_ns_ = 0;
  unpredicted_ = false;
  for (fifo* f : active_) {
    if (f->entries.empty()) continue;
    const wait_entry* e = f->entries.front();
    if (e->predicted_ns) {
      const long long end = start_of(e, f->last_done_ns) + e->predicted_ns;
      // Live until the close-read window after its predicted end is over; then it counts as unpredicted, read at
      // least as often as its overrun asks.
      const long long window_end = end + policy_.margin(std::chrono::nanoseconds(e->predicted_ns)).count();
      if (now > window_end) overrun_from_ns_ = std::max(overrun_from_ns_, window_end);
      if (now <= window_end) {
        if (earliest_end_ns_ == 0 || end < earliest_end_ns_) {
          earliest_end_ns_ = end;
          earliest_duration_ns_ = e->predicted_ns;
        }
        continue;
      }
    }
    unpredicted_ = true;
  }
}

std::optional<poll_policy::predicted_end> completion_queues::earliest_locked(long long now) const noexcept {
  if (earliest_end_ns_ == 0 || !policy_.predict) return std::nullopt;
  return poll_policy::predicted_end{std::chrono::nanoseconds(earliest_end_ns_ - now),
                                    std::chrono::nanoseconds(earliest_duration_ns_)};
}

std::chrono::nanoseconds completion_queues::next_delay(bool close_reader) const {
  std::lock_guard lock(mutex_);
  const long long now = now_ns();
  const auto e = earliest_locked(now);
  std::chrono::nanoseconds d = policy_.next_delay(since_activity(), e ? &*e : nullptr, unpredicted_, close_reader);
  if (overrun_from_ns_ && policy_.predict)
    d = std::min(d, policy_.overrun_delay(std::chrono::nanoseconds(std::max(0LL, now - overrun_from_ns_))));
  return d;
}

std::optional<std::chrono::nanoseconds> completion_queues::until_close_read() const {
  std::lock_guard lock(mutex_);
  const auto e = earliest_locked(now_ns());
  if (!e) return std::nullopt;
  const std::chrono::nanoseconds m = policy_.margin(e->duration);
  if (e->until < -m) return std::nullopt;  // missed
  return std::max(std::chrono::nanoseconds(0), e->until - m);
}

bool completion_queues::has_unpredicted() const {
  std::lock_guard lock(mutex_);
  return unpredicted_ || earliest_end_ns_ == 0;
}

std::int64_t completion_queues::predicted_ns(std::uint64_t key, std::uintptr_t group) const {
  std::lock_guard lock(mutex_);
  return predictor_.predict(duration_predictor::key_of(key, group));
}

}  // namespace cuasync
