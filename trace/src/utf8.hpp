// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: UTF-8 as JSON needs it (RFC 8259: text is UTF-8). Trace files come from anyone: a name with bytes that
// are not UTF-8 is read and written with U+FFFD in their place, so cuasync never writes JSON or a page that other
// tools refuse.
#include <cstddef>
#include <string>
#include <string_view>

namespace cuasync::trace::detail {

//! The length of the well-formed UTF-8 sequence starting at `s[i]` (a byte >= 0x80): 2 to 4, or 0 when it is not
//! one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short).
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = at(i);
  std::size_t n;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode 15, table 3-7)
  if (b >= 0xC2 && b <= 0xDF) n = 2;
  else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

//! Appends `s[i..]`'s next character (a byte >= 0x80) to `out`, or U+FFFD for a byte that starts no well-formed
//! sequence; returns how many bytes were consumed.
inline std::size_t append_utf8_or_replacement(std::string& out, std::string_view s, std::size_t i) {
  if (const std::size_t n = utf8_sequence(s, i)) {
    out.append(s.substr(i, n));
    return n;
  }
  out += "\xEF\xBF\xBD";
  return 1;
}

}  // namespace cuasync::trace::detail
