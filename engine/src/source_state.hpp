// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what the CUDA completion source knows per stream (its waits, for host words and ordering; its admission
// places), shared by cuda_completion_source.cpp (records, queries, releases) and admission.cpp.
#include <cuasync/engine/cuda_completion_source.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace cuasync {
namespace detail {

// What the source knows of a stream: its waits (for host words) and its admission places.
struct stream_state {
  std::uint32_t outstanding = 0;  // waits recorded and not yet released
  std::uint64_t recorded = 0;     // waits recorded so far
  bool words = true;              // the last wait recorded alone stayed alone until released: a word pays off
  std::uint32_t admitted = 0;     // admission places held by operations on this stream
  std::uint32_t waiting = 0;      // operations queued for a place on this stream
  bool held = false;              // an admitted operation holds the stream (later ones wait)
  std::uint32_t granted = 0;      // places granted to waiters whose work is not enqueued yet (later ones wait)
  bool idle() const noexcept { return outstanding == 0 && admitted == 0 && waiting == 0 && !held && granted == 0; }
};

// Stream states under one lock per shard (by stream id), so that the numbers of one stream's events follow their
// order on the stream even when threads record concurrently.
struct record_shard {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, stream_state> streams;
  std::size_t sweep_at = 256;
  // Idle streams keep their state, so a stream's next wait allocates nothing; a crowd of them is dropped.
  void maybe_sweep() {
    if (streams.size() <= sweep_at) return;
    std::erase_if(streams, [](const auto& kv) { return kv.second.idle(); });
    sweep_at = std::max<std::size_t>(256, 2 * streams.size());  // amortised: O(1) a release
  }
};

inline constexpr std::uintptr_t user_event_bit = 1;


// One handle, many streams (per context, per thread): the source cannot vouch for order among its waits.
inline bool is_special_stream(CUstream s) noexcept { return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// The key of a stream's state: its id (never reused, unlike handles); the handle, marked, for the special streams.
inline std::uint64_t stream_key(stream_ref s, std::source_location where) {
  if (is_special_stream(s.get())) return reinterpret_cast<std::uintptr_t>(s.get()) | (std::uint64_t{1} << 62);
  return s.id(where);
}

inline bool has_room(std::uint32_t count, std::uint32_t limit) noexcept { return limit == 0 || count < limit; }

// Takes a place in the context's count if there is room.
inline bool take_context_place(std::atomic<std::uint32_t>& in_flight, std::uint32_t limit) noexcept {
  std::uint32_t cur = in_flight.load(std::memory_order_relaxed);
  do {
    if (!has_room(cur, limit)) return false;
  } while (!in_flight.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  return true;
}

}  // namespace detail

struct cuda_completion_source::state {
  using record_shard = detail::record_shard;
  std::array<record_shard, 16> shards;
  std::atomic<std::uint64_t> next_order{1};
  std::atomic<bool> host_words{true};
  std::atomic<bool> words_alone{true};  // record_wait's waits with a word record no event (use_words_alone)
  std::atomic<std::uint64_t> word_waits{0};
  record_shard& shard(std::uint64_t key) noexcept { return shards[std::hash<std::uint64_t>()(key) % shards.size()]; }
};

}  // namespace cuasync
