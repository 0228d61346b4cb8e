// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The little JSON the trace needs: a writer (the Chrome trace, the summaries, the `cuasync` command's --json)
//! and a reader (traces read back by `cuasync trace`). RFC 8259 text; numbers are doubles; objects keep their order.
//! The reader is meant for files a user hands over: it bounds nesting and throws on anything malformed.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace cuasync::trace::json {

class value;
using array = std::vector<value>;
using object = std::vector<std::pair<std::string, value>>;

//! A parsed JSON value.
class value {
 public:
  value() = default;  // null
  explicit value(bool b) : v_(b) {}
  explicit value(double d) : v_(d) {}
  explicit value(std::string s) : v_(std::move(s)) {}
  explicit value(array a) : v_(std::move(a)) {}
  explicit value(object o) : v_(std::move(o)) {}

  bool is_null() const noexcept { return std::holds_alternative<std::monostate>(v_); }
  bool is_bool() const noexcept { return std::holds_alternative<bool>(v_); }
  bool is_number() const noexcept { return std::holds_alternative<double>(v_); }
  bool is_string() const noexcept { return std::holds_alternative<std::string>(v_); }
  bool is_array() const noexcept { return std::holds_alternative<array>(v_); }
  bool is_object() const noexcept { return std::holds_alternative<object>(v_); }
  //! Whether it is a number with no fraction.
  bool is_integer() const noexcept;

  //! The value as that type. @throws std::runtime_error when it is another type.
  bool as_bool() const;
  double as_number() const;
  const std::string& as_string() const;
  const array& as_array() const;
  const object& as_object() const;

  //! An object's member, or nullptr when this is not an object or has no such key.
  const value* find(std::string_view key) const noexcept;

 private:
  std::variant<std::monostate, bool, double, std::string, array, object> v_;
};

//! Thrown by parse(): what is wrong and the byte offset where.
class parse_error : public std::runtime_error {
 public:
  parse_error(const std::string& what, std::size_t offset)
      : std::runtime_error(what + " at byte " + std::to_string(offset)), offset_(offset) {}
  std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

//! The maximum nesting parse() accepts (deeper input is refused, not a stack overflow).
inline constexpr int max_depth = 128;

//! Parses one JSON text (surrounding white space allowed). @throws parse_error
value parse(std::string_view text);

//! `s` as a JSON string literal, quotes included (control characters, quotes and backslashes escaped; other bytes
//! as they are: the trace's text is UTF-8).
std::string quote(std::string_view s);

//! Builds JSON text: commas and colons are placed by the writer. Compact, except newline() between values.
class writer {
 public:
  writer& begin_object();
  writer& end_object();
  writer& begin_array();
  writer& end_array();
  writer& key(std::string_view k);
  writer& value(std::string_view s);
  writer& value(const char* s) { return value(std::string_view(s)); }
  writer& value(const std::string& s) { return value(std::string_view(s)); }
  writer& value(bool b);
  writer& value(std::int64_t n);
  writer& value(std::uint64_t n);
  writer& value(int n) { return value(static_cast<std::int64_t>(n)); }
  writer& value(double d);  //!< shortest text that reads back the same; non-finite values are written as null
  writer& null();
  //! A value already formatted as JSON (fixed-point microseconds, a nested summary); the caller vouches for it.
  writer& raw(std::string_view text);
  //! A line break before the next value or closing bracket, after the comma (one trace event per line).
  writer& newline();

  template <class T>
  writer& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const noexcept { return out_; }
  std::string take() noexcept { return std::move(out_); }

 private:
  void before_value();
  void flush_newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
  bool newline_pending_ = false;
};

}  // namespace cuasync::trace::json
