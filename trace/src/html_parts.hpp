#pragma once
// Shared by the HTML page's two parts: the SVG timeline (html_timeline.cpp) and the page around it (html_page.cpp).
#include <cuasync/trace/timeline.hpp>

#include <string>
#include <string_view>

namespace cuasync::trace::detail {

// Text for HTML content and attribute values: & < > " ' escaped.
std::string html_escape(std::string_view text);

// The page's geometry: the SVG is as wide as a 1400-pixel window's content.
inline constexpr int svg_width = 1360;

// The SVG drawing of `t` (normalized): axis, lane groups, lanes, spans.
std::string timeline_svg(const timeline& t);

}  // namespace cuasync::trace::detail
