// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The timeline as one self-contained HTML page: inline CSS, an inline script and the data embedded (no
//! external script, font or URL), so it opens anywhere, offline, and can be attached to a bug report.
//!
//! The timeline is drawn on a canvas by the page's script: one horizontal lane per stream, copy direction and host
//! thread, grouped by GPU then the host, each labelled on the left with a marker of its kind (streams blue, copy
//! directions orange, host threads purple); a time axis from the start of recording; spans coloured by category,
//! with a legend, their names drawn inside them where they fit (cut with an ellipsis), every detail on hover;
//! nested host spans drawn inset. At any zoom, spans narrower than a pixel are not drawn one by one: each pixel
//! column of a lane is shaded by the fraction of it that such spans cover (in the colour of the category that
//! covers most of it), so a lane shows where it was busy and idle instead of a solid stripe. The diagnostics'
//! findings are marked in red on the lanes and at the times of the spans they concern, numbered as in the list
//! below the timeline.
//!
//! Zoom with the wheel or a pinch (around the pointer), pan by dragging, or use the keys + - left right and 0 (all
//! of it). The URL's hash holds the view: `#zoom=F` (F times the whole, centred) or `#zoom=F@T` (centred at T ms
//! from the start of recording); the page writes it as the view changes, and reads it when it opens.
//!
//! The data: a string table and, per lane, its spans as columns of integers (begin deltas, durations, string and
//! category indexes, bytes): about 25 bytes of page per span.
//! Below: the overlap summary as a table and the findings.

#include <cuasync/trace/timeline.hpp>

#include <iosfwd>
#include <string>
#include <string_view>

namespace cuasync::trace {

//! Writes the page for `t` (normalized on a copy).
void write_html(const timeline& t, std::ostream& out);
std::string to_html(const timeline& t);

//! The fill colour of a category ("#4e79a7"), as in the page's legend.
std::string_view category_colour(category c) noexcept;
//! The colour of a lane kind's marker: streams "#005ac8", copy directions "#c85a00", host threads "#6b2fa0".
//! Used by nothing else on the page, so that a screenshot's lanes can be counted by these colours.
std::string_view lane_marker_colour(lane_kind k) noexcept;
//! The colour of a finding's marker on the lanes (used by nothing else on the page either).
inline constexpr std::string_view finding_marker_colour = "#b00020";

}  // namespace cuasync::trace
