// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The rules about the GPU's idle time in a pipeline: host stages running while the GPU had nothing to do (a
// host-bound pipeline), the GPU idle between two operations because the host waited for the first before it issued
// the second (a host round trip), and fewer requests in flight than the GPU needs to stay busy (too few slots).
// Each looks at the gaps between the GPU's busy intervals (the union of every GPU span), so a GPU kept busy by
// other work is never reported, however the host spends its time.
#include "diagnostic_rules.hpp"

#include <cuasync/trace/overlap.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace cuasync::trace::detail {
namespace {

// The GPU idle less than this share of the window (first GPU begin to last GPU end) is a pipeline at its bound.
constexpr double min_idle_share = 0.10;
// Nor is less idle time than this in all (a short trace's ramp-up and drain).
constexpr std::int64_t min_idle_ns = 100'000;
// Host stages must cover at least this share of the GPU's idle time for the pipeline to be host-bound.
constexpr double min_stage_cover = 0.5;
// A gap shorter than this between two GPU operations is launch latency; the round trips must add up to this share
// of the window, over at least this many gaps.
constexpr std::int64_t min_round_trip_gap_ns = 5'000;
constexpr double min_round_trip_share = 0.05;
constexpr std::size_t min_round_trips = 3;
// A GPU span's end is mapped onto the host clock from timing events, within a few µs (trace::gpu_clock_map: an upper
// bound by its tightest sample's lateness), so a host wait seen ending up to this long before the GPU span it waited
// for still waited for it (on the H200 a synchronize's end came 0.2 µs before its kernel's mapped end).
constexpr std::int64_t clock_slack_ns = 5'000;
// Too few slots: at least this many requests seen, and fewer streams than (cycle / bound) / this factor.
constexpr std::size_t min_requests = 8;
constexpr double slots_margin = 1.25;
// A host thread busy with stages this share of the window is the limit itself: more slots would not help. And the
// host stages must cover this share of the GPU's idle time: requests with host work (a chain of GPU operations
// linked by host waits is the round-trip finding's).
constexpr double saturated_thread_share = 0.6;
constexpr double min_slot_stage_cover = 0.25;

struct interval {
  std::int64_t begin, end;
};

// The union of `v`, sorted.
std::vector<interval> merged(std::vector<interval> v) {
  std::sort(v.begin(), v.end(), [](const interval& a, const interval& b) { return a.begin < b.begin; });
  std::vector<interval> out;
  for (const interval& i : v) {
    if (!out.empty() && i.begin <= out.back().end) out.back().end = std::max(out.back().end, i.end);
    else out.push_back(i);
  }
  return out;
}

std::int64_t length(const std::vector<interval>& v) {
  std::int64_t n = 0;
  for (const interval& i : v) add_clamped(n, i.end - i.begin);
  return n;
}

// The length of the intersection of two sorted, disjoint lists.
std::int64_t overlap(const std::vector<interval>& a, const std::vector<interval>& b) {
  std::int64_t n = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    add_clamped(n, std::min(a[i].end, b[j].end) - std::max(a[i].begin, b[j].begin));
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return n;
}

// A host stage: the application's own spans and the slot pipeline's stages on a thread lane.
bool is_host_stage(const span& s) noexcept {
  return s.lane.kind == lane_kind::host_thread &&
         (s.category == category::user || s.category == category::pipeline_stage);
}

// What all three rules look at: the GPU's busy intervals, the gaps between them and the host stages.
struct gpu_idle {
  std::vector<interval> busy, gaps;
  std::int64_t window_ns = 0, idle_ns = 0;
  std::vector<interval> stages;  // the union of every host stage

  explicit gpu_idle(const timeline& t) {
    std::vector<interval> gpu, host;
    for (const span& s : t.spans) {
      if (is_gpu_work(s)) gpu.push_back({s.begin_ns, s.end_ns});
      else if (is_host_stage(s)) host.push_back({s.begin_ns, s.end_ns});
    }
    busy = merged(std::move(gpu));
    stages = merged(std::move(host));
    if (busy.size() < 2) return;
    window_ns = busy.back().end - busy.front().begin;
    for (std::size_t i = 1; i < busy.size(); ++i) gaps.push_back({busy[i - 1].end, busy[i].begin});
    idle_ns = length(gaps);
  }
  // Idle enough to be worth a finding.
  bool idle() const noexcept {
    return window_ns > 0 && idle_ns >= min_idle_ns && idle_ns >= min_idle_share * static_cast<double>(window_ns);
  }
  std::string idle_text() const {
    return format_percent(idle_ns, window_ns) + " of the window (" + format_duration(idle_ns) + " of " +
           format_duration(window_ns) + ")";
  }
};

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::optional<finding> find_host_bound_pipeline(const timeline& t) {
  const gpu_idle g(t);
  if (!g.idle()) return std::nullopt;
  const std::int64_t covered = overlap(g.gaps, g.stages);
  if (covered < min_stage_cover * static_cast<double>(g.idle_ns)) return std::nullopt;

  // Each stage's share of the idle time, its spans and threads.
  struct stage_facts {
    std::vector<interval> spans;
    std::set<std::uint64_t> threads;
    std::int64_t total_ns = 0;
  };
  std::map<std::string, stage_facts> stages;
  for (const span& s : t.spans) {
    if (!is_host_stage(s)) continue;
    stage_facts& f = stages[s.name.empty() ? std::string(to_string(s.category)) : s.name];
    f.spans.push_back({s.begin_ns, s.end_ns});
    f.threads.insert(s.lane.id);
    add_clamped(f.total_ns, s.duration_ns());
  }
  std::string top;
  std::int64_t top_covered = -1;
  std::vector<std::pair<std::string, std::int64_t>> shares;
  for (auto& [name, f] : stages) {
    const std::int64_t c = overlap(g.gaps, merged(f.spans));
    shares.emplace_back(name, c);
    if (c > top_covered) top = name, top_covered = c;
  }
  const stage_facts& worst = stages[top];

  finding f = new_finding(diagnostic::host_bound_pipeline);
  // The top stage's spans that ran while the GPU was idle.
  for (const span& s : t.spans) {
    if (!is_host_stage(s) || (s.name.empty() ? std::string(to_string(s.category)) : s.name) != top) continue;
    const std::vector<interval> one{{s.begin_ns, s.end_ns}};
    if (overlap(g.gaps, one) <= 0) continue;
    ++f.occurrences;
    add_example(f, t, s);
  }
  std::sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string others;
  for (std::size_t i = 1; i < shares.size() && i < 3; ++i)
    if (shares[i].second > 0)
      others += (others.empty() ? "; then \"" : ", \"") + shares[i].first + "\" " +
                format_percent(shares[i].second, g.idle_ns);
  const std::size_t n = worst.spans.size();
  f.summary = "the GPU was idle " + g.idle_text() + " while host stages ran through " +
              format_percent(covered, g.idle_ns) + " of that idle time: most of it \"" + top + "\" (" +
              format_percent(top_covered, g.idle_ns) + " of the idle time; " + std::to_string(n) +
              (n == 1 ? " span" : " spans") + " on " + std::to_string(worst.threads.size()) +
              (worst.threads.size() == 1 ? " thread" : " threads") + ", " +
              format_duration(n ? worst.total_ns / static_cast<std::int64_t>(n) : 0) + " each on average)" + others;
  f.explanation =
      "While the GPU had nothing to run, the host was still running these stages: the GPU waited for the host. A "
      "pipeline runs at the pace of its slowest stage, and here that is a host stage, not the GPU's copies or "
      "kernels, so a faster GPU or better overlap on the GPU would not make it faster.";
  f.fix =
      "Run the host stage for more requests at once, split it, or make it shorter. C++: keep more requests in "
      "flight (`slot_pipeline_options::slots`, or more coroutines each with its own stream and buffers) and run "
      "the stage on a pool so that several run side by side (`async_run_blocking` on a `boost::asio::thread_pool`, "
      "`slot_pipeline_options::post_threads`), or split one request's stage across those threads (`cuasync demo "
      "--slots N --threads N --parts N` shows the effect). C: keep more requests in flight, each on its own stream "
      "with its own completion on the queue, and run the stage on worker threads of your own, not on the thread "
      "that drains the queue. Python: keep more requests in flight (more tasks, `asyncio.gather`) and run the "
      "stage with `loop.run_in_executor` on a `concurrent.futures.ThreadPoolExecutor` (NumPy and PyTorch release "
      "the GIL in their kernels), not in the coroutine itself.";
  return f;
}

std::optional<finding> find_gpu_idle_round_trips(const timeline& t) {
  const gpu_idle g(t);
  if (g.gaps.empty()) return std::nullopt;
  // The GPU span that ends each gap's busy interval before it and the one that begins the interval after it.
  std::map<std::int64_t, const span*> ends, begins;
  std::map<std::uint64_t, const span*> issue_by_flow;
  std::map<std::uint64_t, std::vector<const span*>> issues_by_stream;  // in begin order
  std::vector<const span*> waits;
  for (const span& s : t.spans) {
    if (is_gpu_work(s)) {
      const span*& e = ends[s.end_ns];
      if (!e) e = &s;
      const span*& b = begins[s.begin_ns];
      if (!b) b = &s;
    } else if (is_issue(s)) {
      if (s.flow) issue_by_flow[s.flow] = &s;
      issues_by_stream[s.stream_id].push_back(&s);
    } else if (s.lane.kind == lane_kind::host_thread &&
               (s.category == category::await ||
                (s.category == category::sync && (s.flags & flag::host_wait) && !(s.flags & flag::device_wide)))) {
      waits.push_back(&s);
    }
  }
  for (auto& [stream, v] : issues_by_stream)
    std::sort(v.begin(), v.end(), [](const span* a, const span* b) { return a->begin_ns < b->begin_ns; });
  std::sort(waits.begin(), waits.end(), [](const span* a, const span* b) { return a->end_ns < b->end_ns; });

  finding f = new_finding(diagnostic::gpu_idle_round_trip);
  std::int64_t total = 0, seen = 0, host = 0, to_gpu = 0;
  for (const interval& gap : g.gaps) {
    if (gap.end - gap.begin < min_round_trip_gap_ns) continue;
    const span* a = ends.count(gap.begin) ? ends[gap.begin] : nullptr;
    const span* b = begins.count(gap.end) ? begins[gap.end] : nullptr;
    if (!a || !b) continue;
    // B's issue: linked by its flow id, else the latest issue on its stream before it began.
    const span* issue = nullptr;
    if (b->flow && issue_by_flow.count(b->flow)) {
      issue = issue_by_flow[b->flow];
    } else if (auto it = issues_by_stream.find(issuing_stream(*b)); it != issues_by_stream.end()) {
      for (const span* s : it->second)
        if (s->begin_ns <= b->begin_ns) issue = s;
    }
    // Issued after A had finished: the host could not, or did not, enqueue it earlier.
    if (!issue || issue->begin_ns < gap.begin) continue;
    // A host wait that was waiting when A finished and ended before B's issue: the round trip.
    const span* wait = nullptr;
    for (auto it = std::lower_bound(waits.begin(), waits.end(), gap.begin - clock_slack_ns,
                                    [](const span* w, std::int64_t at) { return w->end_ns < at; });
         it != waits.end() && (*it)->end_ns <= issue->begin_ns; ++it)
      if ((*it)->begin_ns <= gap.begin) wait = *it;
    if (!wait) continue;
    // A gap mostly spent in host stages is the host-bound finding's.
    const std::vector<interval> one{gap};
    if (overlap(one, g.stages) >= min_stage_cover * static_cast<double>(gap.end - gap.begin)) continue;
    ++f.occurrences;
    add_clamped(total, gap.end - gap.begin);
    add_clamped(seen, std::max<std::int64_t>(0, wait->end_ns - gap.begin));
    add_clamped(host, issue->begin_ns - std::max(wait->end_ns, gap.begin));
    add_clamped(to_gpu, gap.end - issue->begin_ns);
    add_place(f, *a);
    add_place(f, *b);
    if (f.examples.size() < max_examples)
      f.examples.push_back("the GPU idle " + format_duration(gap.end - gap.begin) + " after " + describe(t, *a) +
                           ": the host's wait (" + (wait->name.empty() ? "wait" : wait->name) + ") ended " +
                           format_duration(wait->end_ns - gap.begin) + " later, it issued " +
                           (b->name.empty() ? std::string(to_string(b->category)) : b->name) + " " +
                           format_duration(issue->begin_ns - wait->end_ns) + " after that");
  }
  if (f.occurrences < min_round_trips || total < min_round_trip_share * static_cast<double>(g.window_ns))
    return std::nullopt;
  const auto n = static_cast<std::int64_t>(f.occurrences);
  f.summary = "the GPU idled " + std::to_string(f.occurrences) + " times (" + format_duration(total) + ", " +
              format_percent(total, g.window_ns) +
              " of the window) between an operation and the next, which the host issued only after waiting for the "
              "first: on average " + format_duration(seen / n) + " until the host saw the completion, " +
              format_duration(host / n) + " until it issued the next operation, " + format_duration(to_gpu / n) +
              " from that issue to the GPU";
  f.explanation =
      "A host round trip between two GPU operations: the GPU finished one, the host noticed, issued the next, and "
      "the GPU started it; meanwhile the GPU had nothing to run. When the next operation needs only the earlier "
      "one's result on the GPU, it can be enqueued at once behind it, and the GPU goes from one to the other "
      "without waiting for the host.";
  f.fix =
      "Enqueue the dependent work before waiting: on the same stream, stream order already makes it wait; on "
      "another stream, let the GPU wait for an event. C++: `stream_ref::wait(event)`, or tracked buffers with "
      "`runtime::launch(s, k, cfg, reads(b), ...)`, which insert that wait. C: the `event_wait` call (the stream "
      "waits for the event on the device) instead of waiting for a completion on the queue and then launching. "
      "Python: `stream.wait_event(event)` or `stream.wait_stream(other)` instead of `await` before the launch. "
      "Await (`async_wait`, `stream_wait` on the queue, `await stream.wait()`) only where the host itself needs "
      "the result, and keep other requests' work queued meanwhile so that the GPU has something to run.";
  return f;
}

std::optional<finding> find_too_few_slots(const timeline& t) {
  const gpu_idle g(t);
  if (!g.idle() || overlap(g.gaps, g.stages) < min_slot_stage_cover * static_cast<double>(g.idle_ns))
    return std::nullopt;
  // A host thread that was running stages nearly all the time is the limit: more slots would queue behind it.
  std::map<std::uint64_t, std::vector<interval>> by_thread;
  for (const span& s : t.spans)
    if (is_host_stage(s)) by_thread[s.lane.id].push_back({s.begin_ns, s.end_ns});
  for (auto& [thread, v] : by_thread)
    if (length(merged(std::move(v))) >= saturated_thread_share * static_cast<double>(g.window_ns))
      return std::nullopt;

  // Each stream's request: its most frequent GPU operation (name and lane), and when each of them began.
  std::map<std::uint64_t, std::map<std::pair<std::string, int>, std::vector<std::int64_t>>> ops;
  for (const span& s : t.spans)
    if (is_gpu_work(s))
      if (const std::uint64_t id = issuing_stream(s))
        ops[id][{s.name, static_cast<int>(s.lane.kind)}].push_back(s.begin_ns);
  std::size_t slots = 0, requests = 0, intervals = 0;
  std::int64_t cycles = 0;
  for (auto& [stream, by_op] : ops) {
    auto most = std::max_element(by_op.begin(), by_op.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    std::vector<std::int64_t>& begins = most->second;
    if (begins.size() < 2) continue;
    std::sort(begins.begin(), begins.end());
    ++slots;
    requests += begins.size();
    intervals += begins.size() - 1;
    add_clamped(cycles, begins.back() - begins.front());
  }
  if (!slots || requests < min_requests) return std::nullopt;
  const double cycle_ns = static_cast<double>(cycles) / static_cast<double>(intervals);
  const overlap_summary o = summarize(t);
  if (o.critical == stage::none) return std::nullopt;
  const double bound_ns = static_cast<double>(o.time_of(o.critical).busy_ns) / static_cast<double>(requests);
  if (bound_ns <= 0) return std::nullopt;
  const double needed = cycle_ns / bound_ns;
  if (static_cast<double>(slots) * slots_margin > needed) return std::nullopt;

  finding f = new_finding(diagnostic::too_few_slots);
  f.occurrences = slots;
  // The idle gaps, each on the lane of the GPU work that ended just before it.
  std::map<std::int64_t, lane> lane_ending;
  for (const span& s : t.spans)
    if (is_gpu_work(s)) lane_ending.emplace(s.end_ns, s.lane);
  for (const interval& gap : g.gaps)
    if (f.places.size() < max_finding_places) f.places.push_back({lane_ending.at(gap.begin), gap.begin, gap.end});
  const auto need = static_cast<std::size_t>(std::ceil(needed));
  f.summary = std::to_string(slots) + (slots == 1 ? " stream (slot) ran" : " streams (slots) ran") + " " +
              std::to_string(requests) + " requests, each stream one every " +
              format_duration(static_cast<std::int64_t>(cycle_ns)) + " (its cycle), while the GPU's busiest stage (" +
              std::string(to_string(o.critical)) + ") took " + format_duration(static_cast<std::int64_t>(bound_ns)) +
              " per request: cycle / bound = " + fixed(needed, 1) + ", so about " + std::to_string(need) +
              " requests in flight would keep it busy; the GPU was idle " + g.idle_text();
  f.examples.push_back("requests per second = slots / cycle = " + std::to_string(slots) + " / " +
                       format_duration(static_cast<std::int64_t>(cycle_ns)) + "; at the bound it would be 1 / " +
                       format_duration(static_cast<std::int64_t>(bound_ns)));
  f.explanation =
      "Each slot (a stream with its own buffers) holds one request from its preprocess to its check, so requests "
      "per second are slots / cycle. With fewer slots than cycle / bound, the GPU runs out of work between "
      "requests even when every stage overlaps well: the copies and kernels are short next to everything else a "
      "request waits for (host stages, hand-offs between threads, awaits).";
  f.fix =
      "Use at least cycle / bound slots (" + std::to_string(need) +
      " here; a few more absorb jitter, and each needs host threads for its host stages). C++: "
      "`slot_pipeline_options::slots`, or as many coroutines each with its own stream and buffers (`cuasync demo "
      "--slots " + std::to_string(need) + "`). C: as many requests in flight, each with its own stream and buffers, "
      "before draining the queue. Python: as many concurrent tasks, each with its own `cuasync.Stream()` and "
      "buffers. Shortening the cycle (fewer hand-offs, the host stages split across threads) needs fewer slots.";
  return f;
}

}  // namespace cuasync::trace::detail
