// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder's rings: the lock-free table from stream handle to ring, the hot path that records an
// operation (note) and the marks the engine makes (done, faulted). Reading them back: flight_read.cpp; the clock of
// the hot path: flight_clock.cpp.
#include "flight_state.hpp"

#include <cuasync/trace/blocking_calls.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <unordered_set>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace cuasync::trace::flight {
namespace {

static_assert(sizeof(std::source_location) == sizeof(std::uint64_t), "a call site is stored as one word");

// ---- the table: open addressing by handle, keys published with release, a tombstone for retired streams ----
constexpr std::size_t table_size = 8192;  // twice the most rings there can be
constexpr std::size_t max_rings = 4096;
constexpr std::uintptr_t tombstone = ~std::uintptr_t{0};
struct table_entry {
  std::atomic<std::uintptr_t> key{0};
  std::atomic<ring*> value{nullptr};
};
table_entry table[table_size];

std::size_t home(std::uintptr_t key) noexcept {
  return static_cast<std::size_t>((key >> 3) * 0x9E3779B97F4A7C15ull >> 51) & (table_size - 1);
}

struct thread_state {
  std::uint64_t queue = 0, token = 0;  // the awaiter_scope's
  std::uint64_t ordinal = 0;
};
thread_local thread_state this_thread;

}  // namespace

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: hooks may record during static destruction
  return *r;
}

ring::ring(void* s, const stream_identity& id, std::uint32_t length)
    : identity(id), mask(length - 1), slots(new slot[length]) {
  stream.store(s, std::memory_order_relaxed);
}

void ring::reuse(void* s, const stream_identity& id) noexcept {
  stream.store(s, std::memory_order_relaxed);
  identity = id;
  for (std::uint32_t i = 0; i <= mask; ++i) slots[i].version.store(0, std::memory_order_relaxed);
  next.store(0, std::memory_order_relaxed);
  sole_writer.store(0, std::memory_order_relaxed);
  sole_writing.store(0, std::memory_order_relaxed);
  done_up_to.store(0, std::memory_order_relaxed);
  retired.store(false, std::memory_order_relaxed);
  fault_seq.store(0, std::memory_order_relaxed);
  fault_result.store(0, std::memory_order_relaxed);
  fault_name.store(nullptr, std::memory_order_relaxed);
  stall_dumped_seq = 0;
  fault_dumped_seq = 0;
}

ring* find_ring(void* stream) noexcept {
  const auto key = reinterpret_cast<std::uintptr_t>(stream);
  for (std::size_t i = home(key), n = 0; n < table_size; i = (i + 1) & (table_size - 1), ++n) {
    const std::uintptr_t k = table[i].key.load(std::memory_order_acquire);
    if (k == key) return table[i].value.load(std::memory_order_acquire);
    if (k == 0) return nullptr;
  }
  return nullptr;
}

ring* open_ring(void* stream, const stream_identity& id) noexcept {
  registry& reg = the_registry();
  try {
    std::lock_guard lock(reg.mutex);
    if (ring* r = find_ring(stream)) return r;
    std::unique_ptr<ring> fresh;
    if (!reg.spare.empty() && reg.spare.back()->mask + 1 == reg.length) {
      fresh = std::move(reg.spare.back());
      reg.spare.pop_back();
      fresh->reuse(stream, id);
    } else if (reg.rings.size() + reg.spare.size() < max_rings) {
      fresh = std::make_unique<ring>(stream, id, reg.length);
    } else {
      reg.untracked.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    const auto key = reinterpret_cast<std::uintptr_t>(stream);
    for (std::size_t i = home(key), n = 0; n < table_size; i = (i + 1) & (table_size - 1), ++n) {
      const std::uintptr_t k = table[i].key.load(std::memory_order_relaxed);
      if (k != 0 && k != tombstone) continue;
      ring* r = fresh.get();
      reg.rings.push_back(std::move(fresh));
      table[i].value.store(r, std::memory_order_release);
      table[i].key.store(key, std::memory_order_release);
      return r;
    }
    reg.untracked.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    reg.untracked.fetch_add(1, std::memory_order_relaxed);
  }
  return nullptr;
}

void retire_ring(void* stream) noexcept {
  registry& reg = the_registry();
  std::lock_guard lock(reg.mutex);
  const auto key = reinterpret_cast<std::uintptr_t>(stream);
  for (std::size_t i = home(key), n = 0; n < table_size; i = (i + 1) & (table_size - 1), ++n) {
    const std::uintptr_t k = table[i].key.load(std::memory_order_relaxed);
    if (k == 0) return;
    if (k != key) continue;
    ring* r = table[i].value.load(std::memory_order_relaxed);
    table[i].key.store(tombstone, std::memory_order_release);  // the value stays: a racing find still gets a ring
    r->retired.store(true, std::memory_order_relaxed);
    try {
      reg.retired_order.push_back(r);
    } catch (...) {
      return;  // kept in use: it is only not recycled
    }
    // The 64 latest retired rings stay readable (a stream destroyed just before a hang may be what it is about);
    // older ones are recycled.
    if (reg.retired_order.size() > 64) {
      ring* old = reg.retired_order.front();
      reg.retired_order.erase(reg.retired_order.begin());
      auto it = std::find_if(reg.rings.begin(), reg.rings.end(), [&](const auto& p) { return p.get() == old; });
      if (it != reg.rings.end()) {
        try {
          reg.spare.push_back(std::move(*it));
          reg.rings.erase(it);
        } catch (...) {
        }
      }
    }
    return;
  }
}

namespace {
constexpr std::uint64_t shared_writers = ~std::uint64_t{0};
std::uint64_t next_seq(ring& r, std::uint64_t me) noexcept;  // below; the slow side calls back into it

// Whether this process can make every one of its running threads pass a full memory barrier (Linux membarrier,
// private expedited; registered once): what lets a ring's one writer take sequence numbers without a locked add.
bool asymmetric_fences() noexcept {
#if defined(__linux__) && defined(SYS_membarrier)
  static const bool registered = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return registered;
#else
  return false;
#endif
}

// The slow side of next_seq: the ring's first writer becomes its sole writer; a second one makes the ring shared
// (once: then every writer takes a locked add) after the sole writer's plain update in progress, if any, is done.
std::uint64_t next_seq_shared(ring& r, std::uint64_t me) noexcept {
  std::uint64_t w = r.sole_writer.load(std::memory_order_acquire);
  if (w == 0 && asymmetric_fences() && r.sole_writer.compare_exchange_strong(w, me, std::memory_order_acq_rel))
    return next_seq(r, me);  // as the sole writer now (a thread may already be taking that away: it waits for us)
  if (w != shared_writers) {
    w = r.sole_writer.exchange(shared_writers, std::memory_order_acq_rel);
#if defined(__linux__) && defined(SYS_membarrier)
    if (w != 0 && w != shared_writers) {
      // Dekker's handshake with the sole writer's compiler-only fence (next_seq): after this barrier on every
      // thread, either it saw `shared` or its `sole_writing` is visible here; its update ends in a few instructions.
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
      while (r.sole_writing.load(std::memory_order_acquire) != 0) {
#if defined(__x86_64__)
        _mm_pause();
#endif
      }
    }
#endif
  }
  return r.next.fetch_add(1, std::memory_order_relaxed) + 1;
}

// The next sequence number of `r` for the thread numbered `me` (inlined where a slot is written).
[[gnu::always_inline]] inline std::uint64_t next_seq(ring& r, std::uint64_t me) noexcept {
  if (r.sole_writer.load(std::memory_order_relaxed) == me) [[likely]] {
    r.sole_writing.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the other side's membarrier is this store's fence
    if (r.sole_writer.load(std::memory_order_relaxed) == me) [[likely]] {
      const std::uint64_t seq = r.next.load(std::memory_order_relaxed) + 1;
      r.next.store(seq, std::memory_order_relaxed);
      r.sole_writing.store(0, std::memory_order_release);  // the thread making the ring shared reads `next` after
      return seq;
    }
    r.sole_writing.store(0, std::memory_order_release);
  }
  return next_seq_shared(r, me);
}

// Writes an operation into the next slot of `r`: the version made odd, the fields, then the version even (a reader
// keeps a slot only when it read the same even version before and after the fields). A launch has five shape words,
// any other operation three.
template <std::size_t N>
mark write_slot(ring* r, const char* call, const char* name, std::source_location where,
                const std::uint64_t (&shape)[N]) noexcept {
  constexpr bool launch = N == 5;
  thread_state& mine = this_thread;  // read once: in the shared library each read of a thread-local is a call
  if (mine.ordinal == 0) [[unlikely]] mine.ordinal = this_thread_ordinal();
  const thread_state me = mine;
  const std::uint64_t seq = next_seq(*r, me.ordinal);
  slot& s = r->slots[seq & r->mask];
  s.version.store(2 * seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.ticks.store(read_ticks(), std::memory_order_relaxed);
  s.call.store(reinterpret_cast<std::uintptr_t>(call), std::memory_order_relaxed);
  s.where.store(std::bit_cast<std::uint64_t>(where), std::memory_order_relaxed);
  for (std::size_t i = 0; i < N; ++i) s.shape[i].store(shape[i], std::memory_order_relaxed);
  s.awaiter_queue.store(me.queue, std::memory_order_relaxed);
  s.awaiter_token.store(me.token, std::memory_order_relaxed);
  s.thread.store(me.ordinal | (launch ? slot::launch_bit : 0), std::memory_order_relaxed);
  s.status.store(0, std::memory_order_relaxed);
  s.done_ticks.store(0, std::memory_order_relaxed);
  s.name.store(reinterpret_cast<std::uintptr_t>(name), std::memory_order_relaxed);
  s.version.store(2 * seq, std::memory_order_release);
  // The next slot's two lines, fetched for writing now (the next launch is microseconds away): the stores of its
  // note then hit the cache instead of waiting on a read-for-ownership, which the driver's next locked instruction
  // (its own lock, beside the launch) would wait for.
  const slot* next = &r->slots[(seq + 1) & r->mask];
  __builtin_prefetch(next, 1, 3);
  __builtin_prefetch(reinterpret_cast<const char*>(next) + 64, 1, 3);
  return {r, seq};
}
}  // namespace

mark note(ring* r, const op& o) noexcept {
  const char* name = o.stable_name ? o.stable_name : intern_name(o.name);
  if (o.grid[0] != 0) {
    std::uint64_t shape[5];
    launch_shape(o.grid, o.block, o.shared_bytes, o.params, o.param_sizes, shape);
    return write_slot(r, o.call, name, o.where, shape);
  }
  const std::uint64_t shape[3] = {o.bytes, o.src, o.dst};
  return write_slot(r, o.call, name, o.where, shape);
}

mark note_launch(ring* r, const launch_record& l) noexcept {
  return write_slot(r, l.call, l.stable_name, l.where, l.shape);
}

const char* intern_name(std::string_view name) noexcept {
  if (name.empty()) return "";
  // The thread's last few names: most threads issue the same few operations over and over.
  struct cached {
    const char* interned = nullptr;
    std::size_t size = 0;
  };
  thread_local cached recent[8];
  thread_local unsigned next_victim = 0;
  for (const cached& c : recent)
    if (c.size == name.size() && std::memcmp(c.interned, name.data(), name.size()) == 0) return c.interned;
  static std::mutex* mutex = new std::mutex;                               // never destroyed: a dump at exit
  static auto* names = new std::unordered_set<std::string>;                // reads them; node-based: c_str() stays
  const char* interned = "(a name that could not be kept)";
  try {
    std::lock_guard lock(*mutex);
    interned = names->emplace(name).first->c_str();
  } catch (...) {
    return interned;  // out of memory: the operation is still recorded
  }
  recent[next_victim++ % 8] = {interned, name.size()};
  return interned;
}

void set_status(mark m, status st, int result) noexcept {
  if (!m) return;
  slot& s = m.r->slots[m.seq & m.r->mask];
  if (s.version.load(std::memory_order_relaxed) >> 1 != m.seq) return;  // rewritten since
  s.status.store(static_cast<std::uint64_t>(st) | std::uint64_t(static_cast<std::uint32_t>(result)) << 32,
                 std::memory_order_relaxed);
}

void seen_done(mark m) noexcept {
  if (!m) return;
  ring& r = *m.r;
  if (r.fault_seq.load(std::memory_order_relaxed) != 0) return;  // a faulted stream's work did not complete
  std::uint64_t old = r.done_up_to.load(std::memory_order_relaxed);
  while (old < m.seq && !r.done_up_to.compare_exchange_weak(old, m.seq, std::memory_order_relaxed)) {
  }
  if (old >= m.seq) return;
  const std::uint64_t now = ticks();
  const std::uint64_t first = std::max(old + 1, m.seq > r.mask ? m.seq - r.mask : 1);
  for (std::uint64_t q = first; q <= m.seq; ++q) {
    slot& s = r.slots[q & r.mask];
    if (s.version.load(std::memory_order_relaxed) >> 1 == q) s.done_ticks.store(now, std::memory_order_relaxed);
  }
}

void seen_fault(mark m, int result, const char* name) noexcept {
  if (!m) return;
  std::uint64_t expected = 0;
  if (!m.r->fault_seq.compare_exchange_strong(expected, m.seq, std::memory_order_relaxed)) return;  // told already
  m.r->fault_result.store(result, std::memory_order_relaxed);
  m.r->fault_name.store(name, std::memory_order_relaxed);
  fault_seen(*m.r);
}

bool awaited_now() noexcept { return this_thread.queue != 0 || this_thread.token != 0; }

awaiter_scope::awaiter_scope(std::uint64_t queue, std::uint64_t token) noexcept
    : queue_(this_thread.queue), token_(this_thread.token) {
  this_thread.queue = queue;
  this_thread.token = token;
}
awaiter_scope::~awaiter_scope() {
  this_thread.queue = queue_;
  this_thread.token = token_;
}

void reset() noexcept {
  registry& reg = the_registry();
  std::lock_guard lock(reg.mutex);
  for (table_entry& t : table) {
    t.key.store(0, std::memory_order_relaxed);
    t.value.store(nullptr, std::memory_order_relaxed);
  }
  reg.rings.clear();
  reg.spare.clear();
  reg.retired_order.clear();
  reg.untracked.store(0, std::memory_order_relaxed);
}

}  // namespace cuasync::trace::flight
