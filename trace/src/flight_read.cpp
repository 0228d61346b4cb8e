// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reading the flight recorder's rings back (take, read_ring): each slot copied between two reads of its version, so
// a slot a writer is filling meanwhile is skipped, never torn. The writers' side: flight_rings.cpp.
#include "flight_state.hpp"

#include <cuasync/trace/blocking_calls.hpp>
#include <cuasync/trace/clock.hpp>

#include <algorithm>
#include <bit>
#include <ctime>
#include <mutex>
#include <string>

#include <unistd.h>

namespace cuasync::trace::flight {

std::size_t stream_history::in_flight() const noexcept {
  return static_cast<std::size_t>(std::count_if(entries.begin(), entries.end(), [](const entry& e) {
    return !e.done && e.state != status::failed;
  }));
}

namespace {

bool read_slot(const slot& s, std::uint64_t seq, entry& e) {
  const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 != 2 * seq) return false;
  const std::uint64_t t = s.ticks.load(std::memory_order_relaxed);
  const auto* call = reinterpret_cast<const char*>(s.call.load(std::memory_order_relaxed));
  const auto where = std::bit_cast<std::source_location>(s.where.load(std::memory_order_relaxed));
  std::uint64_t shape[5];
  for (int i = 0; i < 5; ++i) shape[i] = s.shape[i].load(std::memory_order_relaxed);
  const std::uint64_t name = s.name.load(std::memory_order_relaxed);
  e.param_sizes.clear();
  e.awaiter_queue = s.awaiter_queue.load(std::memory_order_relaxed);
  e.awaiter_token = s.awaiter_token.load(std::memory_order_relaxed);
  const std::uint64_t thread = s.thread.load(std::memory_order_relaxed);
  const std::uint64_t st = s.status.load(std::memory_order_relaxed);
  const std::uint64_t done = s.done_ticks.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.version.load(std::memory_order_relaxed) != v1) return false;
  // Only now, the slot known whole: its name pointer is one a writer stored (static or interned: never freed).
  e.seq = seq;
  e.issued_ns = ticks_to_ns(t);
  e.call = call ? call : "";
  e.name = name ? reinterpret_cast<const char*>(name) : "";
  e.thread = thread & ~slot::launch_bit;
  const bool launch = (thread & slot::launch_bit) != 0;
  e.bytes = launch ? 0 : shape[0];
  e.src = launch ? 0 : shape[1];
  e.dst = launch ? 0 : shape[2];
  e.grid[0] = e.grid[1] = e.grid[2] = e.block[0] = e.block[1] = e.block[2] = 0;
  e.shared_bytes = e.params = 0;
  if (launch) {
    e.grid[0] = std::uint32_t(shape[0]);
    e.grid[1] = std::uint32_t(shape[0] >> 32);
    e.grid[2] = std::uint32_t(shape[1]);
    e.block[0] = std::uint32_t(shape[1] >> 32);
    e.block[1] = std::uint32_t(shape[2]);
    e.block[2] = std::uint32_t(shape[2] >> 32);
    e.shared_bytes = std::uint32_t(shape[3]);
    e.params = std::uint32_t(shape[3] >> 32);
    for (std::uint32_t i = 0; i < std::min<std::uint32_t>(e.params, 8); ++i)
      e.param_sizes.push_back(std::uint32_t(shape[4] >> (8 * i)) & 0xFF);
  }
  e.file = where.file_name() ? where.file_name() : "";
  e.function = where.function_name() ? where.function_name() : "";
  e.line = where.line();
  e.state = static_cast<status>(st & 0xFFFF'FFFF);
  e.result = static_cast<int>(static_cast<std::uint32_t>(st >> 32));
  e.done_ns = done ? ticks_to_ns(done) : 0;
  return true;
}

}  // namespace

stream_history read_ring(const ring& r) {
  stream_history h;
  h.handle = reinterpret_cast<std::uintptr_t>(r.stream.load(std::memory_order_relaxed));
  h.identity = r.identity;
  h.retired = r.retired.load(std::memory_order_relaxed);
  h.recorded = r.next.load(std::memory_order_acquire);
  h.done_up_to = r.done_up_to.load(std::memory_order_relaxed);
  const std::uint64_t first = h.recorded > r.mask ? h.recorded - r.mask : 1;
  for (std::uint64_t q = first; q <= h.recorded; ++q) {
    entry e;
    if (!read_slot(r.slots[q & r.mask], q, e)) continue;
    e.done = q <= h.done_up_to;
    h.entries.push_back(std::move(e));
  }
  return h;
}

snapshot take(std::string reason) {
  calibrate_clock();
  snapshot s;
  s.reason = std::move(reason);
  s.taken_ns = now_ns();
  s.wall_time_s = static_cast<std::int64_t>(std::time(nullptr));
  s.pid = static_cast<std::uint64_t>(::getpid());
  registry& reg = the_registry();
  {
    std::lock_guard lock(reg.mutex);  // rings are not recycled meanwhile; writers never take it
    s.per_stream = reg.length;
    s.untracked_streams = reg.untracked.load(std::memory_order_relaxed);
    for (const auto& r : reg.rings)
      if (r->next.load(std::memory_order_relaxed) != 0) s.streams.push_back(read_ring(*r));
  }
  auto last_issue = [](const stream_history& h) { return h.entries.empty() ? 0 : h.entries.back().issued_ns; };
  std::stable_sort(s.streams.begin(), s.streams.end(), [&](const stream_history& a, const stream_history& b) {
    const bool fa = a.in_flight() != 0, fb = b.in_flight() != 0;
    if (fa != fb) return fa;
    return last_issue(a) > last_issue(b);
  });
  for (const call_in_flight& c : calls_in_flight())
    s.blocked_calls.push_back("thread " + std::to_string(c.thread) + (c.thread_name.empty() ? "" : " (" + c.thread_name + ")") +
                              " in " + (c.call ? c.call : "?") + " for " +
                              std::to_string((s.taken_ns - c.since_ns) / 1'000'000) + " ms" +
                              (c.where.file_name() && *c.where.file_name()
                                   ? ", called from " + std::string(c.where.file_name()) + ":" +
                                         std::to_string(c.where.line())
                                   : std::string()));
  return s;
}

}  // namespace cuasync::trace::flight
