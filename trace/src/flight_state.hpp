// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the flight recorder's rings and registry (flight_rings.cpp), shared with its watch thread and dumps
// (flight_watch.cpp) and its formats (flight_format.cpp).
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/flight_recorder.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace cuasync::trace::flight {

// One recorded operation. Every field is an atomic word so that a reader on another thread (a dump) never races a
// writer: the writer makes `version` odd, stores the fields, then publishes 2 * seq; a reader keeps a slot only when
// it read the same even version before and after the fields. `status` and `done_ticks` change after publication.
struct alignas(64) slot {
  std::atomic<std::uint64_t> version{0};
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> call{0};   // const char*, a string literal
  std::atomic<std::uint64_t> where{0};  // std::source_location, bit for bit (one pointer to static data)
  // A launch: grid x|y, grid z|block x, block y|z, shared bytes|params (32 bits each), parameter sizes. Any other
  // operation: bytes, src, dst.
  std::atomic<std::uint64_t> shape[5];
  std::atomic<std::uint64_t> awaiter_queue{0}, awaiter_token{0};
  std::atomic<std::uint64_t> thread{0};  // the issuing thread's ordinal | launch_bit
  std::atomic<std::uint64_t> status{0};  // flight::status | result << 32
  std::atomic<std::uint64_t> done_ticks{0};
  std::atomic<std::uint64_t> name{0};  // const char*: static or interned (intern_name), never freed
  std::atomic<std::uint64_t> reserved{0};
  static constexpr std::uint64_t launch_bit = std::uint64_t{1} << 63;
};
// Two cache lines: a launch's note writes two lines, not four (a quarter-kilobyte slot did, with its name copied in).
static_assert(sizeof(slot) == 128);

class ring {
 public:
  ring(void* stream, const stream_identity& id, std::uint32_t length);
  void reuse(void* stream, const stream_identity& id) noexcept;

  std::atomic<void*> stream{nullptr};
  stream_identity identity;
  std::uint32_t mask = 0;
  std::unique_ptr<slot[]> slots;
  // The issuing side, on a line of its own (done_up_to is the completing thread's). While one thread alone issues
  // on the stream, it takes sequence numbers with plain stores: a locked add waits for every earlier store to drain,
  // the driver's writes to the GPU's command buffer included. A second thread takes that away first (next_seq).
  alignas(64) std::atomic<std::uint64_t> next{0};  // the last seq handed out
  std::atomic<std::uint64_t> sole_writer{0};        // 0: none yet; the one issuing thread's ordinal; or shared
  std::atomic<std::uint32_t> sole_writing{0};       // the sole writer is taking a seq with plain stores
  alignas(64) std::atomic<std::uint64_t> done_up_to{0};  // every operation up to it was seen done
  std::atomic<bool> retired{false};
  std::atomic<std::uint64_t> fault_seq{0};   // the wait that failed (0: none)
  std::atomic<std::int64_t> fault_result{0};
  std::atomic<const char*> fault_name{nullptr};
  std::uint64_t stall_dumped_seq = 0;         // the watch thread's: the stalled operation it dumped for
  std::uint64_t fault_dumped_seq = 0;         // and the fault
};

// The clock of the hot path (flight_clock.cpp): the TSC where it is invariant (a few ns to read), else steady_clock,
// else the coarse monotonic clock where both fine ones are slow; ticks_to_ns maps it onto trace::now_ns().
enum class clock_kind { tsc, steady, coarse };
extern const clock_kind the_clock_kind;  // chosen once, by timing each
std::int64_t coarse_ns() noexcept;
// ticks(), inlined where a slot is written.
[[gnu::always_inline]] inline std::uint64_t read_ticks() noexcept {
  switch (the_clock_kind) {
#if defined(__x86_64__)
    case clock_kind::tsc:
      return __rdtsc();
#endif
    case clock_kind::coarse:
      return static_cast<std::uint64_t>(coarse_ns());
    default:
      return static_cast<std::uint64_t>(now_ns());
  }
}
std::uint64_t ticks() noexcept;
std::int64_t ticks_to_ns(std::uint64_t t) noexcept;
void calibrate_clock() noexcept;
const char* clock_name() noexcept;  // for the dump's header

// The registry: every ring ever made (live, retired and free), under one mutex for everything but the lock-free
// find_ring and note.
struct registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<ring>> rings;  // in use: live and retired (readable by dumps)
  std::vector<std::unique_ptr<ring>> spare;  // retired long enough ago: reused for new streams
  std::vector<ring*> retired_order;          // retired rings, oldest first
  std::uint32_t length = 128;
  std::atomic<std::uint64_t> untracked{0};
  std::atomic<std::uint64_t> dumps{0};
};
registry& the_registry();

// Reads one ring (the registry's lock held, or the ring otherwise known not to be recycled).
stream_history read_ring(const ring& r);

// The watch thread is told of a fault (seen_fault) through this; defined in flight_watch.cpp.
void fault_seen(ring& r) noexcept;

}  // namespace cuasync::trace::flight
