#pragma once
//! @file The timeline as one self-contained HTML page: inline SVG and CSS only (no script, no font, no URL), so it
//! opens anywhere, offline, and can be attached to a bug report.
//!
//! One horizontal lane per stream, copy direction and host thread, grouped by GPU then the host, each labelled on
//! the left with a marker of its kind (streams blue, copy directions orange, host threads purple); a time axis; spans
//! coloured by category, with a legend; each span's name, category, duration, label and bytes in its tooltip; nested
//! host spans drawn inset; spans narrower than a pixel merged with their neighbours of the same category. Below:
//! the overlap summary as a table.

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

}  // namespace cuasync::trace
