// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The rules about memory traffic: copies from pageable memory, copy directions that never ran at once, and memory
// used by two streams at once with nothing ordering them.
#include "diagnostic_rules.hpp"

#include <cuasync/trace/overlap.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

namespace cuasync::trace::detail {
namespace {

// "0x7f0000001000"
std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Whether [a, a + n) and [b, b + m) share a byte (0 addresses are unknown and share nothing).
bool ranges_meet(std::uint64_t a, std::uint64_t n, std::uint64_t b, std::uint64_t m) noexcept {
  return a && b && n && m && a < b + m && b < a + n;
}

// Copies with fewer spans per direction than this are too few to say a pattern.
constexpr std::size_t min_copies_per_direction = 3;

// Whether the directions alternated in time: some D2H began between two H2D copies or the other way round (a
// program that uploads everything, then downloads everything, has nothing to overlap without restructuring).
bool directions_interleave(const timeline& t, int device) {
  struct begins {
    std::int64_t first = INT64_MAX, last = INT64_MIN;
    void add(std::int64_t at) { first = std::min(first, at), last = std::max(last, at); }
    bool around(std::int64_t at) const { return first < at && at < last; }
  } h2d, d2h;
  for (const span& s : t.spans) {
    if (s.lane.device != device) continue;
    if (s.lane.kind == lane_kind::copy_h2d) h2d.add(s.begin_ns);
    if (s.lane.kind == lane_kind::copy_d2h) d2h.add(s.begin_ns);
  }
  return std::any_of(t.spans.begin(), t.spans.end(), [&](const span& s) {
    return s.lane.device == device && ((s.lane.kind == lane_kind::copy_d2h && h2d.around(s.begin_ns)) ||
                                       (s.lane.kind == lane_kind::copy_h2d && d2h.around(s.begin_ns)));
  });
}

}  // namespace

std::optional<finding> find_pageable_copies(const timeline& t) {
  // The GPU spans when the trace has them; the host's issue spans otherwise (the same copies, seen once).
  const bool gpu_side = std::any_of(t.spans.begin(), t.spans.end(), [](const span& s) {
    return is_gpu_work(s) && (s.flags & flag::pageable_host);
  });
  finding f = new_finding(diagnostic::pageable_copy);
  std::uint64_t bytes = 0;
  std::int64_t time = 0;
  for (const span& s : t.spans) {
    if (!(s.flags & flag::pageable_host) || is_gpu_work(s) != gpu_side) continue;
    ++f.occurrences;
    bytes += s.bytes;
    add_clamped(time, s.duration_ns());
    add_example(f, t, s);
  }
  if (!f.occurrences) return std::nullopt;
  f.summary = std::to_string(f.occurrences) + " asynchronous cop" + (f.occurrences == 1 ? "y" : "ies") +
              " to or from pageable host memory (" + format_bytes(bytes) + ", " + format_duration(time) +
              (gpu_side ? " on the copy engines)" : " issuing them)");
  f.explanation =
      "The copy engines read and write only page-locked memory. For pageable memory the driver copies through a "
      "pinned buffer of its own with the calling thread's help: the call returns late (a device-to-host copy only "
      "once the data has arrived), the transfer runs at a fraction of the bus's speed, and it does not overlap "
      "kernels or the other copy direction.";
  f.fix =
      "Copy from and to pinned memory: blocks from `rt->pinned()->allocate(bytes)` (the runtime's pinned_pool, "
      "reused without cuMemHostAlloc) or a `pinned_buffer`; pin a long-lived buffer once with "
      "`host_registration::register_memory`. Or let `co_await async_copy(...)` or `runtime::copy_async` stage "
      "pageable memory through the runtime's pinned ring (staged_copier).";
  return f;
}

std::optional<finding> find_copies_not_overlapped(const timeline& t) {
  for (const device_info& d : t.devices) {
    if (d.copy_engines < 2) continue;
    const overlap_summary s = summarize(t, d.device);
    if (s.h2d.spans < min_copies_per_direction || s.d2h.spans < min_copies_per_direction) continue;
    // Overlap below 1% of the shorter direction's busy time is clock noise between copies in a row.
    if (s.h2d_with_d2h_ns > std::min(s.h2d.busy_ns, s.d2h.busy_ns) / 100) continue;
    if (!directions_interleave(t, d.device)) continue;

    finding f = new_finding(diagnostic::copies_not_overlapped);
    std::set<std::uint64_t> streams;
    bool pageable = false, legacy = false;
    for (const span& c : t.spans) {
      if (c.lane.device != d.device || (c.lane.kind != lane_kind::copy_h2d && c.lane.kind != lane_kind::copy_d2h))
        continue;
      ++f.occurrences;
      if (c.stream_id) streams.insert(c.stream_id);
      pageable |= (c.flags & flag::pageable_host) != 0;
      legacy |= (c.flags & flag::legacy_stream) != 0;
      add_example(f, t, c);
    }
    const std::string gpu = "GPU " + std::to_string(d.device);
    f.summary = gpu + " has " + std::to_string(d.copy_engines) + " copy engines, but its " +
                std::to_string(s.h2d.spans) + " host-to-device copies (" + format_duration(s.h2d.busy_ns) +
                " busy) and " + std::to_string(s.d2h.spans) + " device-to-host copies (" +
                format_duration(s.d2h.busy_ns) + " busy) never ran at the same time, though they alternated";
    f.explanation =
        "With two or more copy engines a GPU moves data both ways at once; here each direction waited for the "
        "other, so the copies took the sum of their times instead of the longer of the two.";
    if (streams.size() == 1)
      f.explanation += " Every copy was issued on stream " + std::to_string(*streams.begin()) +
                       ", and one stream runs its work in order.";
    if (pageable) f.explanation += " Some copies used pageable memory, which the driver copies synchronously.";
    if (legacy) f.explanation += " Some copies ran on the legacy default stream, which serializes with others.";
    f.fix =
        "Issue uploads and downloads on different streams (`rt->streams().next()`, a stream per batch or slot), "
        "from pinned memory (`rt->pinned()`), and pipeline the batches so that one batch's download runs beside the "
        "next one's upload: `runtime::slot_pipeline` or `co_await async_run(pipeline, batches)` with 2 or more "
        "slots does this.";
    return f;  // one finding: the first device that shows it (its summary names the device)
  }
  return std::nullopt;
}

std::optional<finding> find_buffers_reused_in_flight(const timeline& t) {
  std::vector<const span*> users;  // GPU work that names the memory it touches, in begin order
  for (const span& s : t.spans)
    if (is_gpu_work(s) && s.bytes && (s.src || s.dst) && issuing_stream(s)) users.push_back(&s);

  finding f = new_finding(diagnostic::buffer_reused_in_flight);
  std::vector<const span*> active;
  for (const span* b : users) {
    std::erase_if(active, [&](const span* a) { return a->end_ns <= b->begin_ns; });
    for (const span* a : active) {
      if (issuing_stream(*a) == issuing_stream(*b) || b->begin_ns >= b->end_ns) continue;
      const bool both_write = ranges_meet(a->dst, a->bytes, b->dst, b->bytes);
      const bool b_reads = ranges_meet(a->dst, a->bytes, b->src, b->bytes);
      const bool a_reads = ranges_meet(a->src, a->bytes, b->dst, b->bytes);
      if (!both_write && !b_reads && !a_reads) continue;
      ++f.occurrences;
      add_place(f, *a);
      add_place(f, *b);
      if (f.examples.size() < max_examples) {
        const std::uint64_t at = both_write || b_reads ? a->dst : a->src;
        f.examples.push_back(describe(t, *a) + "; and " + describe(t, *b) + ": " +
                             (both_write ? "both write" : "one writes what the other reads") + " near " + hex(at) +
                             ", " + format_duration(std::min(a->end_ns, b->end_ns) - b->begin_ns) + " at once");
      }
    }
    active.push_back(b);
  }
  if (!f.occurrences) return std::nullopt;
  f.summary = std::to_string(f.occurrences) + (f.occurrences == 1 ? " pair" : " pairs") +
              " of operations on different streams used the same memory at the same time, at least one of each "
              "pair writing it";
  f.explanation =
      "Nothing ordered these operations: work on different streams is ordered only by an event wait, so one read "
      "half-written data or the writes landed in either order. The usual cause is a buffer (device, or pinned "
      "host) handed to the next batch while a copy or kernel of the previous one still used it.";
  f.fix =
      "Order the streams: record an event where the first use ends and `stream_ref::wait(event)` on the other "
      "stream, or use `runtime::tracked_buffer` with `runtime::launch(s, k, cfg, reads(b), writes(c))` and "
      "`runtime::copy_async`, which insert those waits. Pinned blocks from `rt->pinned()` are not handed out again "
      "before the copies that used them completed.";
  return f;
}

}  // namespace cuasync::trace::detail
