// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The overlap summary: one sweep over the stages' span boundaries, accumulating time per set of busy stages.
#include <cuasync/trace/overlap.hpp>

#include <cuasync/trace/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

namespace cuasync::trace {
namespace {

constexpr unsigned h2d_bit = 1, compute_bit = 2, d2h_bit = 4;

std::optional<unsigned> stage_bit(const span& s) {
  if (s.lane.kind == lane_kind::copy_h2d) return h2d_bit;
  if (s.lane.kind == lane_kind::copy_d2h) return d2h_bit;
  if (s.lane.kind == lane_kind::stream && s.category == category::launch) return compute_bit;
  return std::nullopt;
}

struct boundary {
  std::int64_t at;
  unsigned bit;
  int delta;
};


}  // namespace

std::string_view to_string(stage s) noexcept {
  switch (s) {
    case stage::h2d: return "H2D";
    case stage::compute: return "compute";
    case stage::d2h: return "D2H";
    case stage::none: break;
  }
  return "none";
}

double overlap_summary::overlap_factor() const noexcept {
  if (any_busy_ns <= 0) return 0;
  return static_cast<double>(h2d.busy_ns + compute.busy_ns + d2h.busy_ns) / static_cast<double>(any_busy_ns);
}

const stage_time& overlap_summary::time_of(stage s) const noexcept {
  return s == stage::h2d ? h2d : s == stage::d2h ? d2h : compute;
}

overlap_summary summarize(const timeline& t, std::optional<int> device) {
  overlap_summary out;
  std::vector<boundary> boundaries;
  bool any = false;
  for (const span& s : t.spans) {
    if (device && s.lane.device != *device) continue;
    const auto bit = stage_bit(s);
    if (!bit) continue;
    stage_time& st = *bit == h2d_bit ? out.h2d : *bit == d2h_bit ? out.d2h : out.compute;
    ++st.spans;
    st.bytes += s.bytes;
    const std::int64_t begin = std::min(s.begin_ns, s.end_ns), end = std::max(s.begin_ns, s.end_ns);
    out.window_begin_ns = any ? std::min(out.window_begin_ns, begin) : begin;
    out.window_end_ns = any ? std::max(out.window_end_ns, end) : end;
    any = true;
    if (end > begin) {
      boundaries.push_back({begin, *bit, +1});
      boundaries.push_back({end, *bit, -1});
    }
  }
  std::sort(boundaries.begin(), boundaries.end(), [](const boundary& a, const boundary& b) { return a.at < b.at; });

  // time_in[mask]: how long exactly the stages in `mask` were busy.
  std::array<std::int64_t, 8> time_in{};
  std::array<int, 8> open{};  // open spans per stage bit
  unsigned mask = 0;
  std::int64_t last = boundaries.empty() ? 0 : boundaries.front().at;
  for (const boundary& b : boundaries) {
    time_in[mask] += b.at - last;
    last = b.at;
    open[b.bit] += b.delta;
    mask = (open[h2d_bit] > 0 ? h2d_bit : 0) | (open[compute_bit] > 0 ? compute_bit : 0) |
           (open[d2h_bit] > 0 ? d2h_bit : 0);
  }

  auto sum_where = [&](auto&& keep) {
    std::int64_t total = 0;
    for (unsigned m = 1; m < 8; ++m)
      if (keep(m)) total += time_in[m];
    return total;
  };
  auto fill = [&](stage_time& st, unsigned bit) {
    st.busy_ns = sum_where([&](unsigned m) { return (m & bit) != 0; });
    st.overlapped_ns = sum_where([&](unsigned m) { return (m & bit) != 0 && (m & ~bit) != 0; });
  };
  fill(out.h2d, h2d_bit);
  fill(out.compute, compute_bit);
  fill(out.d2h, d2h_bit);
  out.h2d_with_compute_ns = sum_where([](unsigned m) { return (m & (h2d_bit | compute_bit)) == (h2d_bit | compute_bit); });
  out.d2h_with_compute_ns = sum_where([](unsigned m) { return (m & (d2h_bit | compute_bit)) == (d2h_bit | compute_bit); });
  out.h2d_with_d2h_ns = sum_where([](unsigned m) { return (m & (h2d_bit | d2h_bit)) == (h2d_bit | d2h_bit); });
  out.all_three_ns = time_in[7];
  out.any_busy_ns = sum_where([](unsigned) { return true; });

  if (any) {
    out.critical = stage::h2d;
    for (stage s : {stage::compute, stage::d2h})
      if (out.time_of(s).busy_ns > out.time_of(out.critical).busy_ns) out.critical = s;
  }
  return out;
}

std::string format_duration(std::int64_t ns) {
  char buf[48];
  const double v = static_cast<double>(ns);
  const std::int64_t magnitude = ns < 0 ? -ns : ns;
  if (magnitude < 1'000)
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
  else if (magnitude < 1'000'000)
    std::snprintf(buf, sizeof buf, "%.3f µs", v / 1e3);
  else if (magnitude < 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
  return buf;
}

std::string format_percent(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::string to_text(const overlap_summary& s) {
  if (s.critical == stage::none)
    return "overlap summary: no copies or kernels in the trace (no spans on H2D or D2H lanes, no launch spans on "
           "stream lanes)\n";
  std::string out = "overlap summary: window " + format_duration(s.window_ns()) + ", at least one stage busy " +
                    format_duration(s.any_busy_ns) + ", all idle " + format_duration(s.idle_ns()) + "\n";
  char line[200];
  std::snprintf(line, sizeof line, "  %-8s %7s %14s %8s %14s %10s %14s\n", "stage", "spans", "busy", "window",
                "overlapped", "of busy", "exclusive");
  out += line;
  for (stage st : {stage::h2d, stage::compute, stage::d2h}) {
    const stage_time& t = s.time_of(st);
    std::snprintf(line, sizeof line, "  %-8s %7zu %14s %8s %14s %10s %14s\n", std::string(to_string(st)).c_str(),
                  t.spans, format_duration(t.busy_ns).c_str(), format_percent(t.busy_ns, s.window_ns()).c_str(),
                  format_duration(t.overlapped_ns).c_str(), format_percent(t.overlapped_ns, t.busy_ns).c_str(),
                  format_duration(t.exclusive_ns()).c_str());
    out += line;
  }
  out += "  at once: H2D + compute " + format_duration(s.h2d_with_compute_ns) + ", D2H + compute " +
         format_duration(s.d2h_with_compute_ns) + ", H2D + D2H " + format_duration(s.h2d_with_d2h_ns) +
         ", all three " + format_duration(s.all_three_ns) + "\n";
  out += "  critical stage: " + std::string(to_string(s.critical)) + " (busy " +
         format_duration(s.time_of(s.critical).busy_ns) + ", " + format_percent(s.time_of(s.critical).busy_ns, s.window_ns()) +
         " of the window)\n";
  std::snprintf(line, sizeof line, "  overlap factor: %.2f (the stages' busy times add up to %s, done in %s)\n",
                s.overlap_factor(), format_duration(s.h2d.busy_ns + s.compute.busy_ns + s.d2h.busy_ns).c_str(),
                format_duration(s.any_busy_ns).c_str());
  out += line;
  return out;
}

std::string to_json(const overlap_summary& s) {
  json::writer w;
  auto stage_object = [&](const char* name, const stage_time& t) {
    w.key(name).begin_object();
    w.member("spans", static_cast<std::uint64_t>(t.spans)).member("bytes", static_cast<std::uint64_t>(t.bytes));
    w.member("busy_ns", static_cast<std::int64_t>(t.busy_ns));
    w.member("overlapped_ns", static_cast<std::int64_t>(t.overlapped_ns));
    w.member("exclusive_ns", static_cast<std::int64_t>(t.exclusive_ns())).end_object();
  };
  w.begin_object();
  w.member("window_begin_ns", static_cast<std::int64_t>(s.window_begin_ns));
  w.member("window_end_ns", static_cast<std::int64_t>(s.window_end_ns));
  w.member("window_ns", static_cast<std::int64_t>(s.window_ns()));
  stage_object("h2d", s.h2d);
  stage_object("compute", s.compute);
  stage_object("d2h", s.d2h);
  w.member("h2d_with_compute_ns", static_cast<std::int64_t>(s.h2d_with_compute_ns));
  w.member("d2h_with_compute_ns", static_cast<std::int64_t>(s.d2h_with_compute_ns));
  w.member("h2d_with_d2h_ns", static_cast<std::int64_t>(s.h2d_with_d2h_ns));
  w.member("all_three_ns", static_cast<std::int64_t>(s.all_three_ns));
  w.member("any_busy_ns", static_cast<std::int64_t>(s.any_busy_ns));
  w.member("idle_ns", static_cast<std::int64_t>(s.idle_ns()));
  w.member("critical", to_string(s.critical));
  w.member("overlap_factor", s.overlap_factor());
  w.end_object();
  return w.take();
}

}  // namespace cuasync::trace
