// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the GPU span collector's state per context (gpu_span_collector.cpp): the references its spans are
// measured against, the timing events it reuses, and each stream's queue of spans in flight.
#include "gpu_span_collector.hpp"

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/span.hpp>

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace cuasync::detail {

constexpr std::int64_t reference_lifetime_ns = 2'000'000'000;  // float ms keep ~0.1 µs steps within 2 s

struct reference {
  CUevent event = nullptr;
  trace::gpu_clock_map map;
  std::int64_t created_ns = 0;
};

struct pending {
  timing_events events;
  std::shared_ptr<reference> ref;
  trace::span s;  // begin_ns: when the operation's call began, until the collector sets its start
  bool marker = false;  // a stream wait's end: sets the next span's earliest start, records nothing
};

// One stream's spans in flight, oldest first, and the end of the last one recorded (the next one's start at the
// earliest: the stream runs its work in order). A pass takes `spans` out and leaves `spare` in its place, then keeps
// the emptier of the two as the next spare: in a steady state a submit allocates nothing.
struct stream_queue {
  std::vector<pending> spans;
  std::vector<pending> spare;
  std::int64_t last_end_ns = 0;
};

// Streams are told apart by id (a handle is reused after the stream is destroyed, an id never); a stream whose id
// could not be read (0) by its handle, with the top bit set so that it never equals an id.
inline std::uint64_t queue_key(CUstream stream, std::uint64_t id) {
  return id ? id : reinterpret_cast<std::uintptr_t>(stream) | (std::uint64_t{1} << 63);
}

struct context_state {
  CUcontext ctx = nullptr;
  int device = 0;
  bool dead = false;           // a driver call on it failed: it was destroyed
  CUstream idle = nullptr;     // the collector's own stream: a reference recorded there runs at once
  std::vector<std::shared_ptr<reference>> references;  // the newest last; older ones while spans use them
  std::vector<CUevent> free_events;
  std::map<std::uint64_t, stream_queue> queues;  // by queue_key
};

// Records a reference on the idle stream and watches it: its host time is known within the loop's step. Null when
// the context's calls fail.
std::shared_ptr<reference> new_reference(context_state& c);
// References no queued span uses, but the newest, are destroyed.
void retire_references(context_state& c);

}  // namespace cuasync::detail
