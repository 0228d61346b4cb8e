// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The JSON writer: string quoting, and commas, colons and line breaks placed for the caller.
#include <cuasync/trace/json.hpp>

#include "utf8.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace cuasync::trace::json {

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {  // well-formed UTF-8 as it is, anything else as U+FFFD
      i += detail::append_utf8_or_replacement(out, s, i) - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  flush_newline();
}

void writer::flush_newline() {
  if (newline_pending_) out_ += '\n';
  newline_pending_ = false;
}

writer& writer::begin_object() {
  before_value();
  out_ += '{';
  first_.push_back(true);
  return *this;
}
writer& writer::end_object() {
  flush_newline();
  out_ += '}';
  first_.pop_back();
  return *this;
}
writer& writer::begin_array() {
  before_value();
  out_ += '[';
  first_.push_back(true);
  return *this;
}
writer& writer::end_array() {
  flush_newline();
  out_ += ']';
  first_.pop_back();
  return *this;
}
writer& writer::key(std::string_view k) {
  before_value();
  out_ += quote(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}
writer& writer::value(std::string_view s) {
  before_value();
  out_ += quote(s);
  return *this;
}
writer& writer::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}
writer& writer::value(std::int64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}
writer& writer::value(std::uint64_t n) {
  before_value();
  out_ += std::to_string(n);
  return *this;
}
writer& writer::value(double d) {
  if (!std::isfinite(d)) return null();
  before_value();
  char buf[32];
  const auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
  out_.append(buf, ec == std::errc{} ? p : buf);
  return *this;
}
writer& writer::null() {
  before_value();
  out_ += "null";
  return *this;
}
writer& writer::raw(std::string_view text) {
  before_value();
  out_ += text;
  return *this;
}
writer& writer::newline() {
  newline_pending_ = true;
  return *this;
}

}  // namespace cuasync::trace::json
