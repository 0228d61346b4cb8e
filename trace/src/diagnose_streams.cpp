// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The rules about streams and the SMs: the legacy default stream beside other streams, and a kernel that filled
// every SM while another stream's work waited.
#include "diagnostic_rules.hpp"

#include <cuasync/trace/overlap.hpp>

#include <algorithm>
#include <set>

namespace cuasync::trace::detail {
namespace {

// A wait shorter than this behind a device-filling kernel is launch latency, not lost concurrency.
constexpr std::int64_t min_wait_ns = 50'000;

// Work that needs SMs (copies run on the copy engines, beside any kernel).
bool needs_sms(const span& s) noexcept {
  return s.lane.kind == lane_kind::stream && (s.category == category::launch || s.category == category::memset);
}

}  // namespace

std::optional<finding> find_default_stream_serialization(const timeline& t) {
  // The GPU spans when any carries the flag, else the host's issue spans (the hooks flag both).
  const bool gpu_side = std::any_of(t.spans.begin(), t.spans.end(), [](const span& s) {
    return is_gpu_work(s) && (s.flags & flag::legacy_stream);
  });
  auto considered = [&](const span& s) { return gpu_side ? is_gpu_work(s) : is_issue(s); };
  std::set<std::uint64_t> legacy_ids;
  for (const span& s : t.spans)
    if (considered(s) && (s.flags & flag::legacy_stream)) legacy_ids.insert(issuing_stream(s));
  if (legacy_ids.empty()) return std::nullopt;

  finding f = new_finding(diagnostic::default_stream_serialization);
  std::set<std::uint64_t> others;
  std::size_t blocking = 0, other_ops = 0;
  for (const span& s : t.spans) {
    if (!considered(s)) continue;
    if (s.flags & flag::legacy_stream) {
      ++f.occurrences;
      add_example(f, t, s);
    } else if (const std::uint64_t id = issuing_stream(s); id && !legacy_ids.count(id)) {
      others.insert(id);
      ++other_ops;
      if (s.flags & flag::blocking_stream) ++blocking;
    }
  }
  if (others.empty()) return std::nullopt;  // the legacy stream alone: nothing else to serialize with

  f.summary = std::to_string(f.occurrences) + (f.occurrences == 1 ? " operation" : " operations") +
              " ran on the legacy default stream beside " +
              std::to_string(other_ops) + " on " + std::to_string(others.size()) + " other stream" +
              (others.size() == 1 ? "" : "s") +
              (blocking ? " (" + std::to_string(blocking) + " of them on blocking streams, which it serializes with)"
                        : "");
  f.explanation =
      "The legacy default stream (NULL, CU_STREAM_LEGACY) is one queue for everything issued to it, by this code "
      "and by any library that uses it: its work starts only after the work already issued to every blocking "
      "stream of the context, and blocking streams wait for it in turn, so what it runs cannot overlap them.";
  if (!blocking)
    f.explanation += " The other streams here are non-blocking, so they escaped that; the legacy stream's own work "
                     "still runs one operation after another.";
  f.fix =
      "Issue the work on non-blocking streams: `stream::create(ctx)` (non-blocking unless "
      "`stream_options::non_blocking` is false) or `rt->streams().next()`; adopt a framework's stream with "
      "`stream_ref::adopt`, which refuses the legacy stream, or use CU_STREAM_PER_THREAD. Where a library insists "
      "on the legacy stream, order the streams with events (`stream_ref::wait`) rather than relying on its implicit "
      "synchronization.";
  return f;
}

std::optional<finding> find_kernel_filled_device(const timeline& t) {
  finding f = new_finding(diagnostic::kernel_filled_device);
  std::set<const span*> fillers;
  std::int64_t waited = 0;
  for (const span& k : t.spans) {
    if (!(needs_sms(k) && k.category == category::launch && (k.flags & flag::fills_device))) continue;
    // Spans are in begin order: the candidates begin at or after k; GPU spans timed by events begin when their stream
    // reached them, so work that waited for SMs shows the wait inside its span.
    auto from = std::lower_bound(t.spans.begin(), t.spans.end(), k.begin_ns,
                                 [](const span& s, std::int64_t at) { return s.begin_ns < at; });
    for (auto o = from; o != t.spans.end() && o->begin_ns + min_wait_ns <= k.end_ns; ++o) {
      if (!needs_sms(*o) || o->lane.device != k.lane.device || o->lane.id == k.lane.id) continue;
      const std::int64_t wait = std::min(o->end_ns, k.end_ns) - o->begin_ns;
      if (wait < min_wait_ns) continue;
      ++f.occurrences;
      add_clamped(waited, wait);
      if (fillers.insert(&k).second) add_example(f, t, k);
      add_place(f, *o);
      if (f.examples.size() < max_examples) f.examples.push_back("waited: " + describe(t, *o));
    }
  }
  if (!f.occurrences) return std::nullopt;
  f.summary = std::to_string(fillers.size()) + " kernel" + (fillers.size() == 1 ? "" : "s") +
              " filled every SM while " + std::to_string(f.occurrences) + " operation" +
              (f.occurrences == 1 ? " of another stream was" : "s of other streams were") + " ready (" +
              format_duration(waited) + " of waiting in all)";
  f.explanation =
      "A kernel whose grid alone fills every SM at its occupancy (grid >= SMs x resident blocks per SM) leaves no "
      "room for another stream's kernel until its last blocks have been dispatched: the other streams' work was "
      "issued and ready, but waited, so using several streams bought no concurrency there.";
  f.fix =
      "When the waiting work is latency-critical, give its stream a higher priority "
      "(`rt->streams().next(runtime::priority::high)`, `stream_options::priority`): its blocks are then dispatched "
      "as the big kernel's blocks retire. Otherwise size the big kernel's grid to the device (a grid-stride loop over "
      "SMs x blocks per SM) so it leaves SMs free, or accept the serialization and do not count on that overlap.";
  return f;
}

}  // namespace cuasync::trace::detail
