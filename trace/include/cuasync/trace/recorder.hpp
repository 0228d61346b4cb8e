// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The process-wide recorder. Off by default; `trace::enable()` or the environment variable
//! `CUASYNC_TRACE=path` turns it on (the path is written at exit and by `trace::flush()`: `.html` gives the HTML
//! page, anything else Chrome trace event JSON).
//!
//! Off, a hook costs what `trace::enabled()` costs: one relaxed atomic load and a branch, inline. On, each record
//! goes to a buffer of the recording thread (a mutex nobody else takes until an export), after one atomic increment
//! that enforces the cap; exports merge the threads' buffers. Memory is bounded: at most `max_records` spans, each
//! with a name and a label of at most `max_text_bytes`; what the cap refuses is counted (timeline::dropped) and
//! reported by every exporter.
//!
//! Thread-safe: any thread may record, enable, disable, flush or snapshot at any time. Records racing with clear()
//! land on either side of it.

#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/span.hpp>
#include <cuasync/trace/timeline.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace cuasync::trace {

//! Whether the recorder records: one relaxed load and a branch (the instrumentation word, trace/hooks.hpp).
inline bool enabled() noexcept { return (active_hooks() & hook::record) != 0; }

struct options {
  //! Written by flush() and at exit (if anything was recorded); empty: nothing is written (use snapshot()).
  //! A name ending in ".html" gives the HTML page, any other Chrome trace event JSON.
  std::filesystem::path output;
  //! The cap on recorded spans (over all threads) until clear(). 0 means 1.
  std::size_t max_records = 1'000'000;
};

//! Names and labels longer than this are cut (at a UTF-8 character boundary), to keep memory bounded.
inline constexpr std::size_t max_text_bytes = 256;

//! Starts recording with `o` (replacing earlier options; what was recorded is kept: clear() drops it). The first
//! enable sets the timeline's origin. Registers the at-exit write when `o.output` is set.
void enable(const options& o = {});
//! Stops recording. What was recorded is kept for snapshot() and flush().
void disable() noexcept;
//! The options in force (the environment's when CUASYNC_TRACE turned recording on).
options current_options();

//! Records `s` (label, name and times as given; begin and end swapped if reversed). Does nothing when off; over the
//! cap it only counts the span as dropped. Never throws: a span that cannot be stored counts as dropped.
void record(span s) noexcept;

//! A fresh id for span::flow, unique in the process (below 2^53): the calling thread's lane ordinal above bit 32
//! and a count of that thread's ids below, so it costs a thread-local increment (no atomic, no lookup).
std::uint64_t new_flow_id() noexcept;

//! The lane of the calling thread: lane::host_thread(n), n = 1, 2, ... in the order threads first ask.
lane this_thread_lane() noexcept;
//! Names a lane in every export ("io thread", "slot 2", "stream 7 (inference)"). Thread lanes default to the
//! thread's OS name when it has one (pthread_setname_np).
void name_lane(const lane& l, std::string name);
//! Names the calling thread's lane.
void name_this_thread(std::string name);

namespace detail {
//! Set by the driver's GPU span collector: snapshot() and flush() run it first, so that the spans of operations
//! that completed are in the timeline, not only those the collector's thread already converted.
void set_gpu_span_drain(void (*drain)()) noexcept;
}  // namespace detail

//! Tells the timeline what device `d.device` is (its SM and copy-engine counts, for the diagnostics). The hooks
//! describe each device once; a later description of the same ordinal replaces the earlier one. Kept by clear().
void describe_device(device_info d);
//! Whether device `ordinal` was described (the hooks' test before they query the driver).
bool device_described(int ordinal) noexcept;

//! Everything recorded so far, merged and normalized, with the count of dropped records.
timeline snapshot();
//! Drops what was recorded and resets the dropped count and the cap's count (lane names are kept).
void clear() noexcept;
//! Writes snapshot() to options::output now (overwriting it). Returns the path written, or an empty path when no
//! output is set. @throws std::runtime_error naming the file when it cannot be written.
std::filesystem::path flush();

//! Writes `t` to `path`: HTML when the name ends in ".html", else Chrome trace event JSON.
//! @throws std::runtime_error naming the file when it cannot be written.
void write_file(const timeline& t, const std::filesystem::path& path);

}  // namespace cuasync::trace
