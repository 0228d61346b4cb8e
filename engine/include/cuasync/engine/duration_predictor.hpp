// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `duration_predictor`: how long repeating work takes, learnt from its earlier completions, so that a poller
//! can sleep until just before the work's predicted end and then read closely (docs/architecture.md section 4,
//! "Predicted ends").
//!
//! Work is named by a 64-bit key that a front-end computes from what the operation is (a launch's function, grid,
//! block and shared memory; a copy's kind and size), mixed with its context. Each observation is an interval: the
//! work was last seen pending `lo` after its start and seen done `hi` after it. A close observation (hi − lo within
//! `close_read`: the wait was being polled back to back when it ended) gives the duration; the estimate is the
//! smallest of the last four close ones (a late wake-up never teaches a late end, an outlier only makes the next
//! wake-up early). Without close ones, the largest loose lower bound (`lo`) stands in. An observation that shows the
//! estimate wrong (the work ended before the estimate, or was still running after it) starts the key afresh. A loose
//! one that neither confirms nor refutes it (pending only before the estimate, done when next seen after it: a late
//! wake-up looks the same as an estimate that is too long) lowers it an eighth, never below `lo`, until a close read
//! confirms a duration: a too-long estimate is never kept. Work seen done at its first look teaches too (`lo` 0).
//!
//! The table is two-way set associative, a set in one cache line (one probe per lookup); a new key takes the way
//! with fewer close samples, so a flood of one-off work does not push out work that repeats. Durations are kept in
//! 32 bits of ns (longer ones saturate at ~4.3 s: predicted early, never late). Allocated once at construction: no
//! allocation and no lock of its own (its owner serialises calls).

#include <chrono>
#include <cstdint>
#include <memory>

namespace cuasync {

class duration_predictor {
 public:
  //! Observations closer than this (pending at lo, done at hi) are close reads.
  static constexpr std::int64_t close_read_ns = 10'000;
  static constexpr std::size_t set_count = 512;  // power of two; two keys each
  static constexpr int kept = 4;                  // close samples kept per key

  duration_predictor();
  duration_predictor(const duration_predictor&) = delete;
  duration_predictor& operator=(const duration_predictor&) = delete;

  //! The predicted duration (ns) of work `key`; 0 when unknown (key 0 is never known).
  std::int64_t predict(std::uint64_t key) const noexcept;
  //! Work `key` was seen pending `lo_ns` and done `hi_ns` after its start (0 <= lo_ns <= hi_ns).
  void observe(std::uint64_t key, std::int64_t lo_ns, std::int64_t hi_ns) noexcept;

  //! A key for work `key` of context `group`: one table serves many contexts.
  static std::uint64_t key_of(std::uint64_t key, std::uintptr_t group) noexcept {
    if (key == 0) return 0;
    const std::uint64_t k = key ^ (static_cast<std::uint64_t>(group) * 0x9e3779b97f4a7c15ULL);
    return k ? k : 1;
  }

 private:
  struct slot {
    std::uint64_t key = 0;
    std::uint32_t close[kept] = {};  // close samples (hi, ns), ring
    std::uint32_t loose = 0;  // no close sample: the largest loose lower bound; else a cap (0: none) until confirmed
    std::uint8_t close_n = 0, next = 0;
  };
  struct alignas(64) set {
    slot way[2];
  };
  static std::int64_t estimate(const slot& s) noexcept;
  set& set_of(std::uint64_t key) const noexcept { return table_[(key ^ (key >> 29)) & (set_count - 1)]; }
  std::unique_ptr<set[]> table_;
};

//! Mixes `v` into the work key `h` (a front-end builds its key from an operation's shape with it).
constexpr std::uint64_t mix_work_key(std::uint64_t h, std::uint64_t v) noexcept {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace cuasync
