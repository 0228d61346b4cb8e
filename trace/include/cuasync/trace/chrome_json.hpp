#pragma once
//! @file The Chrome trace event format (JSON object form), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//!
//! Written: one "X" (complete) event per span (ts and dur in microseconds, to the nanosecond, relative to the
//! timeline's origin; "cat" is the category; args: the lane, the label, the bytes, the clock); "M" (metadata) events
//! name each process (pid 1: the host; pid 2 + N: GPU N) and each lane (one tid per lane, numbered from 1 within its
//! process, in lane order), with sort indexes so the viewer keeps that order. "otherData" carries the producer, the
//! format version, the origin (host steady_clock ns) and the count of records dropped at the cap.
//!
//! read_chrome_json() reads that back exactly, and reads other producers' X events too (each of their (pid, tid)
//! pairs becomes a thread lane; categories it does not know become `user`). It refuses numbers outside what a trace
//! holds (times beyond ±10^14 µs, an origin beyond ±10^18 ns, ids and counts beyond 2^53, devices beyond 2^20), so
//! that nothing computed from a timeline it returns can overflow.

#include <cuasync/trace/timeline.hpp>

#include <cstddef>
#include <iosfwd>
#include <string>
#include <string_view>

namespace cuasync::trace {

//! The process id a lane's events carry: 1 for host threads, 2 + device for GPU lanes.
int chrome_pid(const lane& l) noexcept;

//! Writes `t` (normalized by the caller or not: it is normalized here, on a copy) as Chrome trace event JSON.
void write_chrome_json(const timeline& t, std::ostream& out);
std::string to_chrome_json(const timeline& t);

//! Reads Chrome trace event JSON (the object form, or a bare array of events) into a normalized timeline. Events
//! other than "X" and "M" are skipped and counted in `*skipped_events` when given.
//! @throws json::parse_error for malformed JSON, std::runtime_error naming the event for a malformed event.
timeline read_chrome_json(std::string_view text, std::size_t* skipped_events = nullptr);

}  // namespace cuasync::trace
