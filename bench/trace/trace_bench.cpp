// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What tracing costs on the host, each beside what it adds to: a hook with recording off against the same loop without
// it; a host scope with recording on against the two clock reads it must make; a record from one thread and from two
// at once against building the same span; and (as notes) snapshot and export times per span.
#include <cuasync/trace.hpp>
#include <cuasync/trace/flight_recorder.hpp>

#include "bench.hpp"

#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace trace = cuasync::trace;
namespace bench = cuasync::bench;

namespace {

constexpr int samples = 41, iters = 20'000;
std::atomic<std::uint64_t> sink{0};  // keeps the loops' work observable

trace::span make_span(std::int64_t i) {
  trace::span s;
  s.lane = trace::lane::stream(0, 7);
  s.category = trace::category::launch;
  s.begin_ns = i;
  s.end_ns = i + 1000;
  s.name = "scale_add_kernel";  // fits the small-string buffer, as most kernel names do not: see the long row
  return s;
}

// A row in nanoseconds (measure_us gives microseconds; these costs are a few ns to a few hundred).
bench::row ns(std::string name, bench::stats ours, bench::stats baseline, std::string baseline_name) {
  for (bench::stats* st : {&ours, &baseline}) {
    st->median *= 1e3;
    st->p99 *= 1e3;
    st->min *= 1e3;
    st->mean *= 1e3;
  }
  return {std::move(name), "ns", ours, baseline, std::move(baseline_name), true, ""};
}

// A stand-in for the work a hook sits in: enough that the loop is not optimised away.
inline void work(std::uint64_t& x) { x = x * 6364136223846793005u + 1442695040888963407u; }

}  // namespace

int main(int argc, char** argv) {
  // Freed memory stays with malloc, so that "reused memory" rows measure the recorder, not the kernel's page faults.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  bench::report r("trace");
  r.note("machine", "the host (no GPU involved)");
  trace::disable();
  trace::clear();

  // Off: the hook's check, one relaxed load and a branch, in a loop of cheap work; the two variants alternate sample
  // by sample (DEVELOPERS.md).
  std::uint64_t x = 1;
  std::vector<double> plain, hooked, scoped;
  for (int s = 0; s < samples; ++s) {
    plain.push_back(bench::measure_us(1, iters, [&] { work(x); }).median);
    hooked.push_back(bench::measure_us(1, iters, [&] {
      work(x);
      if (trace::enabled()) trace::record(make_span(static_cast<std::int64_t>(x)));
    }).median);
    scoped.push_back(bench::measure_us(1, iters, [&] {
      trace::scope sc(trace::category::sync, "sync");
      work(x);
    }).median);
  }
  sink += x;
  r.add(ns("a hook, recording off", bench::summarize(hooked), bench::summarize(plain), "the loop without it"));
  r.add(ns("a scope, recording off", bench::summarize(scoped), bench::summarize(plain), "the loop without it"));

  trace::span long_name = make_span(0);
  long_name.name = "void scale_add<float, 256>(float const*, float const*, float*, float, long long)";
  long_name.label = "request 42 / decode";
  trace::options o;
  o.max_records = static_cast<std::size_t>(samples) * iters * 8;
  trace::enable(o);
  // A record's cost is mostly the first touch of the memory it lands in (12.8 µs per 4 KiB page on the CI VM, ~35
  // spans a page): measured on fresh memory, then on memory a clear() gave back to malloc (which keeps it: see the
  // mallopt calls at the top).
  std::int64_t i = 0;
  auto record_one = [&] { trace::record(make_span(++i)); };
  auto build_one = [&] { sink += make_span(++i).name.size(); };
  r.add(ns("record, one thread, fresh memory", bench::measure_us(samples, iters, record_one),
           bench::measure_us(samples, iters, build_one), "building the span"));
  trace::clear();
  r.add(ns("record, one thread, reused memory", bench::measure_us(samples, iters, record_one),
           bench::measure_us(samples, iters, build_one), "building the span"));
  trace::clear();
  r.add(ns("a scope, recording on",
         bench::measure_us(samples, iters, [&] { trace::scope sc(trace::category::sync, "sync"); }),
         bench::measure_us(samples, iters, [&] { sink += static_cast<std::uint64_t>(trace::now_ns() + trace::now_ns()); }),
         "two steady_clock reads"));
  trace::clear();
  (void)bench::measure_us(samples, iters, [&] { trace::record(long_name); });
  trace::clear();
  r.add(ns("record, a 79-byte name and a label, reused memory",
           bench::measure_us(samples, iters, [&] { trace::record(long_name); }),
           bench::measure_us(samples, iters, [&] {
             trace::span copy = long_name;
             sink += copy.name.size();
           }),
           "copying the span"));
  trace::clear();
  const bench::stats one = bench::measure_us(samples, iters, record_one);
  bench::stats two{};
  {
    // Both threads record once (so each one's malloc arena holds memory), clear, then record at once, measured.
    std::atomic<int> phase{0};
    std::thread other([&] {
      for (int round = 0; round < 2; ++round) {
        while (phase.load() != 2 * round + 1) {
        }
        for (int k = 0; k < samples * iters; ++k) trace::record(make_span(k));
        phase.fetch_add(1);
      }
    });
    phase = 1;
    (void)bench::measure_us(samples, iters, record_one);
    while (phase.load() != 2) {
    }
    trace::clear();
    phase = 3;
    two = bench::measure_us(samples, iters, record_one);
    other.join();
  }
  r.add(ns("record, two threads at once, reused memory", two, one, "one thread"));
  trace::disable();

  // The flight recorder (trace/flight_recorder.hpp): one operation noted in a stream's ring (what every launch pays
  // with it on), against the same loop's work alone; samples alternate.
  {
    trace::flight::options o;
    o.stall = std::chrono::milliseconds(0);
    o.signal = 0;
    o.to_stderr = false;
    trace::flight::enable(o);
    trace::flight::ring* ring = trace::flight::open_ring(reinterpret_cast<void*>(0x1000), {.device = 0});
    trace::flight::op op;
    op.call = "cuLaunchKernelEx";
    op.name = "a_kernel_name_longer_than_the_small_string_buffer";
    op.grid[0] = op.block[0] = 1;
    op.params = 4;
    std::uint64_t x = 1;
    std::vector<double> noted, plain;
    for (int i = 0; i < samples; ++i) {
      noted.push_back(bench::measure_us(1, iters, [&] {
        work(x);
        op.bytes = x;
        const trace::flight::mark m = trace::flight::note(ring, op);
        trace::flight::set_status(m, trace::flight::status::enqueued);
      }).median);
      plain.push_back(bench::measure_us(1, iters, [&] {
        work(x);
        op.bytes = x;
      }).median);
    }
    sink += x;
    r.add(ns("flight recorder: one operation noted (ring slot and status)", bench::summarize(noted),
             bench::summarize(plain), "the loop's work alone"));
    // The same on 128 streams in turn: each note's slot was last written 16,384 notes ago, so its lines are out of
    // L1 and L2, as a launch finds them after the driver's own work.
    std::vector<trace::flight::ring*> rings;
    for (int i = 0; i < 128; ++i)
      rings.push_back(trace::flight::open_ring(reinterpret_cast<void*>(0x10000 + 0x100 * i), {.device = 0}));
    std::size_t turn = 0;
    std::vector<double> cold_noted, cold_plain;
    for (int i = 0; i < samples; ++i) {
      cold_noted.push_back(bench::measure_us(1, iters, [&] {
        work(x);
        op.bytes = x;
        const trace::flight::mark m = trace::flight::note(rings[turn++ & 127], op);
        trace::flight::set_status(m, trace::flight::status::enqueued);
      }).median);
      cold_plain.push_back(bench::measure_us(1, iters, [&] {
        work(x);
        op.bytes = x;
      }).median);
    }
    sink += x;
    r.add(ns("flight recorder: one operation noted, 128 streams in turn (its slot out of L1/L2)",
             bench::summarize(cold_noted), bench::summarize(cold_plain), "the loop's work alone"));
    trace::flight::disable();
    trace::flight::reset();
  }

  // Exports, per span.
  const auto t0 = bench::clock::now();
  const trace::timeline t = trace::snapshot();
  const double snapshot_us = bench::us_since(t0);
  trace::timeline some = t;
  some.spans.resize(std::min<std::size_t>(some.spans.size(), 100'000));
  auto t1 = bench::clock::now();
  const std::size_t json_bytes = trace::to_chrome_json(some).size();
  const double json_us = bench::us_since(t1);
  t1 = bench::clock::now();
  const std::size_t html_bytes = trace::to_html(some).size();
  const double html_us = bench::us_since(t1);
  char buf[200];
  std::snprintf(buf, sizeof buf, "%.3f us per span (%zu spans from 2 threads)", snapshot_us / t.spans.size(),
                t.spans.size());
  r.note("snapshot", buf);
  std::snprintf(buf, sizeof buf, "%.3f us and %zu bytes per span", json_us / some.spans.size(),
                json_bytes / some.spans.size());
  r.note("Chrome JSON", buf);
  std::snprintf(buf, sizeof buf, "%.3f us and %zu bytes per span (100k spans on 1 lane: mostly merged)",
                html_us / some.spans.size(), html_bytes / some.spans.size());
  r.note("HTML", buf);
  trace::clear();
  r.write(bench::output_dir(argc, argv));
  return sink.load() == 42 ? 1 : 0;  // never 42 in practice; keeps `sink` alive
}
