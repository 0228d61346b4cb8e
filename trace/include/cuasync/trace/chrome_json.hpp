// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The Chrome trace event format (JSON object form), which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//!
//! Written: one "X" (complete) event per span (ts and dur in microseconds, to the nanosecond, relative to the
//! timeline's origin; "cat" is the category; args: the lane, the label, the bytes, the clock, the flow id); "M"
//! (metadata) events name each process (the host: the recording process's real id, timeline::pid, so that a trace
//! of the same process from another tool, PyTorch's profiler say, puts its host threads beside cuasync's; GPU N:
//! chrome_gpu_pid_base + N, above every Linux process id) and each lane (one tid per lane, numbered from 1 within
//! its process, in lane order), with sort indexes so the viewer keeps that order. Each host issue span linked to the
//! GPU span it issued (span::flow) gives a flow: an "s" event in the issue and an "f" event (binding point
//! "enclosing") in the GPU span, with the flow id as "id", at the middle of each, so Perfetto draws an arrow from
//! the launch or copy call to its kernel or copy. "otherData" carries the producer, the format version, the origin
//! (host steady_clock ns), the process id and the count of records dropped at the cap.
//!
//! read_chrome_json() reads that back exactly (the flow ids from the X events' args; the "s"/"t"/"f" events
//! themselves, its own or another tool's, are passed over), and reads other producers' X events too (each of their (pid, tid)
//! pairs becomes a thread lane; categories it does not know become `user`). It refuses numbers outside what a trace
//! holds (times beyond ±10^14 µs, an origin beyond ±10^18 ns, ids and counts beyond 2^53, devices beyond 2^20), so
//! that nothing computed from a timeline it returns can overflow.

#include <cuasync/trace/timeline.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace cuasync::trace {

//! GPU N's events carry pid chrome_gpu_pid_base + N: above Linux's largest pid_max (2^22), so never a real process.
inline constexpr std::int64_t chrome_gpu_pid_base = std::int64_t{1} << 22;
//! The process id a lane's events carry: `t.pid` for host threads (1 when it is 0: unknown), chrome_gpu_pid_base +
//! device for GPU lanes.
std::int64_t chrome_pid(const timeline& t, const lane& l) noexcept;

//! Writes `t` (normalized by the caller or not: it is normalized here, on a copy) as Chrome trace event JSON.
void write_chrome_json(const timeline& t, std::ostream& out);
std::string to_chrome_json(const timeline& t);

//! Reads Chrome trace event JSON (the object form, or a bare array of events) into a normalized timeline. Events
//! other than "X", "B"/"E", "M" and the flow events are skipped and counted in `*skipped_events` when given.
//! @throws json::parse_error for malformed JSON, std::runtime_error naming the event for a malformed event.
timeline read_chrome_json(std::string_view text, std::size_t* skipped_events = nullptr);

}  // namespace cuasync::trace
