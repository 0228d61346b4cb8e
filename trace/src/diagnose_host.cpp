// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The rules about the host: device-wide synchronization between GPU work, a host wait followed at once by more GPU
// work, and synchronous allocations between launches.
#include "diagnostic_rules.hpp"

#include <cuasync/trace/overlap.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace cuasync::trace::detail {
namespace {

// A host wait followed within this gap by the same thread's next issue did nothing with the result in between
// (anything that took longer may have: reading results is not traced).
constexpr std::int64_t max_gap_after_wait_ns = 50'000;
// Fewer synchronous allocations than this between GPU work is a warm-up, not a hot path.
constexpr std::size_t min_hot_allocations = 2;

bool is_gpu_or_issue(const span& s) noexcept { return is_gpu_work(s) || is_issue(s); }

}  // namespace

std::optional<finding> find_device_synchronize(const timeline& t) {
  std::int64_t first = INT64_MAX, last = INT64_MIN;  // begins of the first and the last GPU work or issue
  for (const span& s : t.spans)
    if (is_gpu_or_issue(s)) first = std::min(first, s.begin_ns), last = std::max(last, s.begin_ns);
  finding f = new_finding(diagnostic::device_synchronize);
  std::int64_t blocked = 0;
  for (const span& w : t.spans) {
    if (w.category != category::sync || !(w.flags & flag::device_wide)) continue;
    // Inside the traced region: GPU work began before it and was issued or began after it.
    if (!(first < w.begin_ns && last >= w.end_ns)) continue;
    ++f.occurrences;
    add_clamped(blocked, w.duration_ns());
    add_example(f, t, w);
  }
  if (!f.occurrences) return std::nullopt;
  f.summary = std::to_string(f.occurrences) + " device-wide synchronization" + (f.occurrences == 1 ? "" : "s") +
              " between GPU work (the host blocked " + format_duration(blocked) + " in all)";
  f.explanation =
      "A device-wide synchronization (cuCtxSynchronize) waits for every stream of the context, not only for the "
      "work this code needs: the host stops issuing, the GPU drains and then idles until the host issues again, and "
      "other threads' streams are waited for too.";
  f.fix =
      "Wait for what is needed: `stream_ref::synchronize()` or `event_ref::synchronize()`, better a device-side "
      "`stream_ref::wait(event)`, or `co_await async_wait(stream, use_awaitable)` so that no thread blocks. Keep "
      "`context_ref::synchronize()` for teardown and error checks.";
  return f;
}

std::optional<finding> find_host_waits(const timeline& t) {
  // Each thread's spans in begin order (the timeline's order, split by lane).
  std::map<std::uint64_t, std::vector<const span*>> by_thread;
  for (const span& s : t.spans)
    if (s.lane.kind == lane_kind::host_thread) by_thread[s.lane.id].push_back(&s);

  finding f = new_finding(diagnostic::host_wait);
  std::size_t same_stream = 0;
  std::int64_t blocked = 0;
  for (const auto& [thread, spans] : by_thread) {
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const span& w = *spans[i];
      if (w.category != category::sync || !(w.flags & flag::host_wait) || (w.flags & flag::device_wide)) continue;
      // The thread's first span after the wait; spans that began before it (an enclosing stage) are not after it.
      const span* next = nullptr;
      for (std::size_t j = i + 1; j < spans.size() && !next; ++j)
        if (spans[j]->begin_ns >= w.end_ns) next = spans[j];
      if (!next || !is_issue(*next) || next->begin_ns - w.end_ns > max_gap_after_wait_ns) continue;
      ++f.occurrences;
      add_clamped(blocked, w.duration_ns());
      if (w.stream_id && w.stream_id == next->stream_id) ++same_stream;
      add_place(f, w);
      add_place(f, *next);
      if (f.examples.size() < max_examples)
        f.examples.push_back(describe(t, w) + ", then " + format_duration(next->begin_ns - w.end_ns) +
                             " later: " + describe(t, *next));
    }
  }
  if (!f.occurrences) return std::nullopt;
  f.summary = std::to_string(f.occurrences) + " host wait" + (f.occurrences == 1 ? "" : "s") +
              " (stream or event synchronize) followed at once by the same thread issuing more GPU work (the host "
              "blocked " + format_duration(blocked) + " in all)";
  if (same_stream)
    f.summary += "; " + std::to_string(same_stream) + " issued on the very stream waited for";
  f.explanation =
      "The thread blocked until the GPU finished, only to issue more GPU work right away: the GPU drains and idles "
      "while the host wakes up and issues the next operation, and the thread does nothing meanwhile. When the next "
      "operation only needs the earlier one done, the GPU can wait by itself (on the same stream, stream order "
      "already does it).";
  f.fix =
      "Let the device wait: record an event after the producer and `stream_ref::wait(event)` (cuStreamWaitEvent) "
      "on the consumer's stream, or use `runtime::tracked_buffer` with `runtime::launch(s, k, cfg, reads(b), ...)`, "
      "which inserts that wait. When the host needs the result, `co_await async_wait(stream, use_awaitable)` (or "
      "`async_launch`, `async_copy`) instead of blocking the thread.";
  return f;
}

std::optional<finding> find_allocations_on_hot_path(const timeline& t) {
  // The GPU work's issue times when the trace has them (allocations are host calls), else the GPU spans.
  const bool issues = std::any_of(t.spans.begin(), t.spans.end(), [](const span& s) { return is_issue(s); });
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  std::set<std::uint64_t> issuing_threads;  // an allocation on a thread that issues no GPU work (cuasync's
                                            // background grower, a caller's own) stalls nothing that issues
  for (const span& s : t.spans)
    if (issues ? is_issue(s) : is_gpu_work(s)) {
      first = std::min(first, s.begin_ns), last = std::max(last, s.begin_ns);
      if (issues && s.lane.kind == lane_kind::host_thread) issuing_threads.insert(s.lane.id);
    }
  if (first >= last) return std::nullopt;

  finding f = new_finding(diagnostic::allocation_on_hot_path);
  std::map<std::string, std::size_t> calls;
  std::int64_t time = 0;
  for (const span& a : t.spans) {
    if (a.category != category::alloc || a.lane.kind != lane_kind::host_thread || (a.flags & flag::stream_ordered))
      continue;
    if (a.begin_ns <= first || a.end_ns > last) continue;  // before the first issue or after the last
    if (issues && !issuing_threads.contains(a.lane.id)) continue;
    ++f.occurrences;
    ++calls[a.name.empty() ? "alloc" : a.name];
    add_clamped(time, a.duration_ns());
    add_example(f, t, a);
  }
  if (f.occurrences < min_hot_allocations) return std::nullopt;
  std::string by_call;
  for (const auto& [name, n] : calls) by_call += (by_call.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  f.summary = std::to_string(f.occurrences) + " synchronous allocations or frees between GPU work (" + by_call +
              "), " + format_duration(time) + " of host time";
  f.explanation =
      "cuMemAlloc takes tens of microseconds, cuMemHostAlloc and cuMemHostRegister of large sizes milliseconds, "
      "and cuMemFree / cuMemFreeHost wait until the whole device is idle: on the path that issues work each one "
      "stalls the host, and a free drains the GPU.";
  f.fix =
      "Allocate once before the loop, or from pools: stream-ordered device memory (`runtime::tracked_buffer::"
      "allocate`, `pool_buffer::allocate_async` on `rt->device_pool()`: cuMemAllocFromPoolAsync, ~1 us) and pinned "
      "host blocks from `rt->pinned()->allocate(bytes)` (the pinned_pool reuses them without cuMemHostAlloc).";
  return f;
}

}  // namespace cuasync::trace::detail
