// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The JSON value and its reader: strict recursive descent, bounded depth, every byte checked (bytes that are not
// UTF-8 in a string become U+FFFD).
#include <cuasync/trace/json.hpp>

#include "utf8.hpp"

#include <charconv>
#include <cmath>

namespace cuasync::trace::json {

bool value::is_integer() const noexcept {
  const double* d = std::get_if<double>(&v_);
  return d && std::isfinite(*d) && std::trunc(*d) == *d;
}

namespace {
[[noreturn]] void wrong_type(const char* wanted) { throw std::runtime_error(std::string("JSON: expected ") + wanted); }
}  // namespace

bool value::as_bool() const { return is_bool() ? std::get<bool>(v_) : (wrong_type("a boolean"), false); }
double value::as_number() const { return is_number() ? std::get<double>(v_) : (wrong_type("a number"), 0.0); }
const std::string& value::as_string() const {
  if (!is_string()) wrong_type("a string");
  return std::get<std::string>(v_);
}
const array& value::as_array() const {
  if (!is_array()) wrong_type("an array");
  return std::get<array>(v_);
}
const object& value::as_object() const {
  if (!is_object()) wrong_type("an object");
  return std::get<object>(v_);
}

const value* value::find(std::string_view key) const noexcept {
  const object* o = std::get_if<object>(&v_);
  if (!o) return nullptr;
  for (const auto& [k, v] : *o)
    if (k == key) return &v;
  return nullptr;
}

namespace {

class parser {
 public:
  explicit parser(std::string_view text) : s_(text) {}

  value document() {
    value v = parse_value(0);
    skip_space();
    if (i_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw parse_error("JSON: " + what, i_); }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) fail("unknown literal");
    i_ += word.size();
  }

  value parse_value(int depth) {
    if (depth >= max_depth) fail("nesting deeper than " + std::to_string(max_depth));
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end");
    switch (s_[i_]) {
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case '"': return value(parse_string());
      case 't': literal("true"); return value(true);
      case 'f': literal("false"); return value(false);
      case 'n': literal("null"); return value();
      default: return value(parse_number());
    }
  }

  value parse_object(int depth) {
    ++i_;
    object o;
    if (eat('}')) return value(std::move(o));
    do {
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
      std::string k = parse_string();
      expect(':');
      o.emplace_back(std::move(k), parse_value(depth + 1));
    } while (eat(','));
    expect('}');
    return value(std::move(o));
  }

  value parse_array(int depth) {
    ++i_;
    array a;
    if (eat(']')) return value(std::move(a));
    do a.push_back(parse_value(depth + 1));
    while (eat(','));
    expect(']');
    return value(std::move(a));
  }

  double parse_number() {
    // The grammar first (from_chars alone would take "1." or "+1" or "inf"), then the conversion.
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0')
      ++i_;
    else if (digits() == 0)
      fail("expected a value");
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("expected digits in the exponent");
    }
    double d = 0;
    const auto [p, ec] = std::from_chars(s_.data() + start, s_.data() + i_, d);
    if (ec == std::errc::result_out_of_range) fail("number out of range");
    if (ec != std::errc{} || p != s_.data() + i_) fail("bad number");
    return d;
  }

  unsigned hex4() {
    if (s_.size() - i_ < 4) fail("short \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      u <<= 4;
      if (c >= '0' && c <= '9') u |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') u |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') u |= static_cast<unsigned>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {  // not UTF-8: U+FFFD in its place (a name from anyone's tool)
        i_ += detail::append_utf8_or_replacement(out, s_, i_ - 1) - 1;
        continue;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      switch (const char e = s_[i_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate must be followed by a low one
            if (s_.substr(i_, 2) != "\\u") fail("lone surrogate");
            i_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("lone surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

value parse(std::string_view text) { return parser(text).document(); }

}  // namespace cuasync::trace::json
