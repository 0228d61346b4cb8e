// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The overlap summary: did the copies overlap the kernels? Computed from a timeline's spans.
//!
//! Three stages: H2D (every span on an H2D lane: copies and staged-copy chunks), D2H (every span on a D2H lane) and
//! compute (`launch` spans on stream lanes: kernels, as the GPU ran them). A stage's busy time is the length of the
//! union of its spans (two kernels at once on two streams count once). The window runs from the first begin to the
//! last end of any of those spans. A stage's overlapped time is the part of its busy time during which at least one
//! other stage was busy too. The critical stage is the busiest one (ties: H2D, then compute, then D2H): in a
//! pipeline whose stages overlap fully, the time per batch approaches the critical stage's busy time per batch.
//! `overlap_factor` = (sum of the three busy times) / (time at least one was busy): 1 when nothing overlapped,
//! up to 3 when all three ran side by side throughout.

#include <cuasync/trace/timeline.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cuasync::trace {

enum class stage : std::uint8_t { h2d, compute, d2h, none };
//! "H2D", "compute", "D2H", "none".
std::string_view to_string(stage s) noexcept;

struct stage_time {
  std::int64_t busy_ns = 0;        //!< length of the union of the stage's spans
  std::int64_t overlapped_ns = 0;  //!< of that, the time at least one other stage was busy
  std::size_t spans = 0;
  std::uint64_t bytes = 0;         //!< bytes moved (copy stages)
  std::int64_t exclusive_ns() const noexcept { return busy_ns - overlapped_ns; }
};

struct overlap_summary {
  std::int64_t window_begin_ns = 0, window_end_ns = 0;  //!< first begin and last end of the stages' spans
  stage_time h2d, compute, d2h;
  std::int64_t h2d_with_compute_ns = 0;  //!< H2D and compute busy at once (whether D2H was or not)
  std::int64_t d2h_with_compute_ns = 0;
  std::int64_t h2d_with_d2h_ns = 0;
  std::int64_t all_three_ns = 0;
  std::int64_t any_busy_ns = 0;          //!< at least one stage busy
  stage critical = stage::none;          //!< the busiest stage; none without spans

  std::int64_t window_ns() const noexcept { return window_end_ns - window_begin_ns; }
  std::int64_t idle_ns() const noexcept { return window_ns() - any_busy_ns; }
  //! (h2d + compute + d2h busy) / any_busy: 1 = fully serial; 0 without spans.
  double overlap_factor() const noexcept;
  const stage_time& time_of(stage s) const noexcept;
};

//! The summary of `t`'s spans, of one device's lanes when `device` is given.
overlap_summary summarize(const timeline& t, std::optional<int> device = std::nullopt);

//! A table for people: the window, each stage's busy, overlapped and exclusive time, the pairs, the critical stage.
std::string to_text(const overlap_summary& s);
//! The same as a JSON object (times in nanoseconds; keys as in the struct).
std::string to_json(const overlap_summary& s);

//! "12.345 ms", "870 ns", "1.250 s": a duration with a unit that suits it.
std::string format_duration(std::int64_t ns);
//! "42.5%": `part` of `whole` (0.0% when `whole` is not positive).
std::string format_percent(std::int64_t part, std::int64_t whole);

}  // namespace cuasync::trace
