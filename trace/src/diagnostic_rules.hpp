// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The diagnostics' rules (one function per diagnostic, in four files by what they look at: memory traffic, streams
// and the SMs, the host, the GPU's idle time in a pipeline) and what they share: which spans are GPU work, which stream issued a span, how a span is
// named in a finding.
#include <cuasync/trace/diagnostics.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::trace::detail {

// How many spans a finding lists as examples.
inline constexpr std::size_t max_examples = 5;

// A span the GPU ran: on a stream lane or a copy lane (not a host thread's issue span).
bool is_gpu_work(const span& s) noexcept;
// A host span that issued GPU work (a launch, copy or memset on a thread lane, with the stream it went to).
bool is_issue(const span& s) noexcept;
// The stream a span's work went to: the lane's id on a stream lane, `stream_id` elsewhere (0: unknown).
std::uint64_t issuing_stream(const span& s) noexcept;

// "scale_add on stream 7 (GPU 0) at 1.250 ms, 1.500 ms long, label "batch 3"": a span as a finding names it (times
// from the timeline's origin).
std::string describe(const timeline& t, const span& s);
// "8.000 MiB", "512 B".
std::string format_bytes(std::uint64_t bytes);
// `sum += d` for sums of durations, held at INT64_MAX: a trace read from a file may hold many spans of years each.
inline void add_clamped(std::int64_t& sum, std::int64_t d) noexcept {
  if (d > 0) sum = d > INT64_MAX - sum ? INT64_MAX : sum + d;
}

// An empty finding of kind `d`.
inline finding new_finding(diagnostic d) {
  finding f;
  f.kind = d;
  return f;
}
// Adds `s` to `f.places` while fewer than max_finding_places are there.
void add_place(finding& f, const span& s);
// Adds `s` to `f.examples` while fewer than max_examples are there, and to `f.places`.
void add_example(finding& f, const timeline& t, const span& s);

// Each rule: its finding, or nothing when the timeline (normalized) does not show it.
std::optional<finding> find_pageable_copies(const timeline& t);
std::optional<finding> find_default_stream_serialization(const timeline& t);
std::optional<finding> find_device_synchronize(const timeline& t);
std::optional<finding> find_copies_not_overlapped(const timeline& t);
std::optional<finding> find_kernel_filled_device(const timeline& t);
std::optional<finding> find_host_waits(const timeline& t);
std::optional<finding> find_allocations_on_hot_path(const timeline& t);
std::optional<finding> find_buffers_reused_in_flight(const timeline& t);
std::optional<finding> find_host_bound_pipeline(const timeline& t);
std::optional<finding> find_gpu_idle_round_trips(const timeline& t);
std::optional<finding> find_too_few_slots(const timeline& t);

}  // namespace cuasync::trace::detail
