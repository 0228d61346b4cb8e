// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared by the HTML page's parts: the page around the timeline (html_page.cpp), the timeline's data as compact
// columns (html_timeline.cpp) and the inline viewer that draws them on a canvas (html_viewer.cpp).
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/timeline.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace cuasync::trace::detail {

// Text for HTML content and attribute values: & < > " ' escaped.
std::string html_escape(std::string_view text);
// Escaped like html_escape, with each `code` span (Markdown backticks, as the findings' texts write them) as
// <code>code</code>; a backtick without its pair stays as it is.
std::string html_with_code(std::string_view text);

// The timeline of `t` (normalized) and the places of `findings` as one JSON object for the viewer: a string table,
// per lane its spans as columns of numbers (begin deltas, durations, name, label, category, bytes), per finding its
// places as (lane, begin, end) triples. Safe inside a <script> element ('<' written as \u003c).
std::string timeline_data(const timeline& t, const std::vector<finding>& findings);

// The viewer: the CSS of the timeline's parts and its script, in two parts that go one after the other into one
// <script> (they share one function's scope): the data, the view and the drawing (html_viewer.cpp), then the input
// (html_viewer_input.cpp: hover, clicks, drag, pinch, wheel, keys, buttons).
extern const std::string_view viewer_style;
extern const std::string_view viewer_script;
extern const std::string_view viewer_script_input;

}  // namespace cuasync::trace::detail
