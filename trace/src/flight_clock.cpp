// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder's clock: the cheapest fine clock of the machine, chosen once (read inline by the hot path,
// flight_state.hpp's read_ticks), and its mapping onto trace::now_ns() for the dumps.
#include "flight_state.hpp"

#include <cuasync/trace/clock.hpp>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace cuasync::trace::flight {
namespace {

// ---- the clock ----
// The cheapest of three, chosen once by timing each: the TSC (only where the kernel says it is constant and does not
// stop: then it counts at one rate on every core, and two readings against steady_clock map it), steady_clock, and
// CLOCK_MONOTONIC_COARSE (the same clock at the kernel tick's resolution, a few ms), taken only when both fine clocks
// cost more than 30 ns a read (a virtual machine that traps the TSC: 70 ns for rdtsc and 134 ns for steady_clock
// measured on one).
bool invariant_tsc() noexcept {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
#endif
  return false;
}

template <class Read>
double cost_ns(Read read) {
  constexpr int n = 2000;
  std::uint64_t sink = 0;
  const std::int64_t t0 = now_ns();
  for (int i = 0; i < n; ++i) sink += static_cast<std::uint64_t>(read());
  const std::int64_t t1 = now_ns();
  return double(t1 - t0 + static_cast<std::int64_t>(sink & 0)) / n;
}

clock_kind choose_clock() {
  double tsc = 1e9;
#if defined(__x86_64__)
  if (invariant_tsc()) tsc = cost_ns([] { return __rdtsc(); });
#endif
  const double steady = cost_ns([] { return now_ns(); });
  const double fine = std::min(tsc, steady);
  if (fine > 30 && cost_ns(coarse_ns) < fine) return clock_kind::coarse;
  return tsc <= steady ? clock_kind::tsc : clock_kind::steady;
}

struct clock_map {
  std::atomic<std::uint64_t> tick0{0};
  std::atomic<std::int64_t> ns0{0};
  std::atomic<double> ns_per_tick{1.0};
};
clock_map& the_clock() {
  static clock_map m;
  return m;
}

}  // namespace

std::int64_t coarse_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

extern const clock_kind the_clock_kind = choose_clock();

std::uint64_t ticks() noexcept { return read_ticks(); }

const char* clock_name() noexcept {
  switch (the_clock_kind) {
    case clock_kind::tsc:
      return "the TSC";
    case clock_kind::coarse:
      return "CLOCK_MONOTONIC_COARSE (times to the kernel's tick, a few ms: the finer clocks are slow here)";
    default:
      return "steady_clock";
  }
}

void calibrate_clock() noexcept {
  clock_map& m = the_clock();
  const std::uint64_t t = ticks();
  const std::int64_t ns = now_ns();
  if (the_clock_kind != clock_kind::tsc) return;
  const std::uint64_t t0 = m.tick0.load(std::memory_order_relaxed);
  if (t0 == 0) {
    m.ns0.store(ns, std::memory_order_relaxed);
    m.tick0.store(t, std::memory_order_release);
    return;
  }
  const std::int64_t dns = ns - m.ns0.load(std::memory_order_relaxed);
  if (t > t0 && dns > 1'000'000) m.ns_per_tick.store(double(dns) / double(t - t0), std::memory_order_relaxed);
}

std::int64_t ticks_to_ns(std::uint64_t t) noexcept {
  if (the_clock_kind != clock_kind::tsc) return static_cast<std::int64_t>(t);
  const clock_map& m = the_clock();
  const std::uint64_t t0 = m.tick0.load(std::memory_order_acquire);
  const double d = t >= t0 ? double(t - t0) : -double(t0 - t);
  return m.ns0.load(std::memory_order_relaxed) +
         static_cast<std::int64_t>(d * m.ns_per_tick.load(std::memory_order_relaxed));
}

}  // namespace cuasync::trace::flight
