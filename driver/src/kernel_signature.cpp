// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A decoder of the part of the Itanium C++ ABI's mangling that kernel names use: a (nested, templated) function
// name, then its parameter types — builtins, pointers, cv-qualifiers, class names, template parameters (`T_`) and
// substitutions (`S_`, `S0_`). Anything else makes it give up (the launch then checks sizes only), never guess.
#include <cuasync/driver/kernel_signature.hpp>

#include <cstddef>

namespace cuasync {

std::string type_code::describe() const {
  std::string base;
  switch (kind()) {
    case type_class::opaque: base = pointers() ? "an opaque type" : "an opaque value"; break;
    case type_class::void_type: base = "void"; break;
    case type_class::boolean: base = "bool"; break;
    case type_class::integer:
      base = size() == 1 ? "char" : size() == 2 ? "short" : size() == 4 ? "int" : size() == 8 ? "long long"
                                                                                             : "__int128";
      break;
    case type_class::floating: base = size() == 2 ? "half" : size() == 4 ? "float" : size() == 8 ? "double" : "long double"; break;
  }
  return base + std::string(pointers(), '*');
}

bool compatible(type_code p, type_code a) noexcept {
  if (p == a) return true;
  const bool p_ptr = p.pointers() > 0, a_ptr = a.pointers() > 0;
  const auto address_sized = [](type_code t) {
    return t.pointers() == 0 && (t.kind() == type_class::opaque || (t.kind() == type_class::integer && t.size() == 8));
  };
  if (p_ptr && !a_ptr) return address_sized(a);  // CUdeviceptr, or a handle-like value, for a pointer
  if (!p_ptr && a_ptr) return address_sized(p);  // a pointer for a CUdeviceptr-like parameter
  if (!p_ptr) return p.kind() == type_class::opaque || a.kind() == type_class::opaque;
  const auto untyped = [](type_code t) { return t.pointers() == 1 && t.kind() == type_class::void_type; };
  if (untyped(p) || untyped(a)) return true;
  return p.pointers() == a.pointers() && (p.kind() == type_class::opaque || a.kind() == type_class::opaque);
}

namespace {

struct parsed {
  type_code code;
  std::string text;
};

class decoder {
 public:
  explicit decoder(std::string_view s) : s_(s) {}

  std::optional<std::vector<kernel_parameter_type>> run() {
    if (!eat("_Z")) return std::nullopt;
    bool templated = false;
    if (!function_name(templated)) return std::nullopt;
    if (templated) {  // a function template's mangling starts its parameter list with the return type
      parsed ret;
      if (!type(ret)) return std::nullopt;
    }
    std::vector<kernel_parameter_type> out;
    if (eat("v") && at_end()) return out;  // no parameters
    while (!at_end()) {
      parsed t;
      if (!type(t) || (t.code.kind() == type_class::void_type && t.code.pointers() == 0)) return std::nullopt;
      out.push_back({t.code, std::move(t.text)});
    }
    return out;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
  std::vector<parsed> subs_;           // substitution candidates, in order
  std::vector<parsed> template_args_;  // the function's own (what T_ names)
  int depth_ = 0;                      // recursion guard against hostile input

  bool at_end() const { return i_ >= s_.size(); }
  char peek(std::size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  bool eat(std::string_view t) {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }
  static parsed opaque(std::string text) { return {type_code::make(type_class::opaque, 0), std::move(text)}; }

  bool source_name(std::string& out) {
    std::size_t n = 0, digits = 0;
    while (peek() >= '0' && peek() <= '9' && digits < 6) n = n * 10 + static_cast<std::size_t>(s_[i_++] - '0'), ++digits;
    if (digits == 0 || n == 0 || n > s_.size() - i_) return false;
    out = std::string(s_.substr(i_, n));
    i_ += n;
    return true;
  }

  // S_ or S<base-36>_ ; St (std::) and the other standard abbreviations are handled by the callers.
  bool substitution(parsed& out) {
    if (!eat("S")) return false;
    std::size_t index = 0;
    if (!eat("_")) {
      std::size_t seq = 0, digits = 0;
      while ((peek() >= '0' && peek() <= '9') || (peek() >= 'A' && peek() <= 'Z')) {
        const char c = s_[i_++];
        seq = seq * 36 + static_cast<std::size_t>(c <= '9' ? c - '0' : c - 'A' + 10);
        if (++digits > 4) return false;
      }
      if (digits == 0 || !eat("_")) return false;
      index = seq + 1;
    }
    if (index >= subs_.size()) return false;
    out = subs_[index];
    return true;
  }

  bool standard_abbreviation(parsed& out) {
    static constexpr std::pair<std::string_view, std::string_view> known[] = {
        {"Sa", "std::allocator"}, {"Sb", "std::basic_string"}, {"Ss", "std::string"},
        {"Si", "std::istream"},   {"So", "std::ostream"},      {"Sd", "std::iostream"}};
    for (const auto& [code, text] : known)
      if (eat(code)) {
        out = opaque(std::string(text));
        return true;
      }
    return false;
  }

  // I <template-arg>+ E, appended to `text` as "<a, b>"; the args are kept in `args`.
  bool template_args(std::string& text, std::vector<parsed>* args) {
    if (!eat("I")) return false;
    if (++depth_ > 32) return false;
    text += '<';
    bool first = true;
    while (!eat("E")) {
      if (at_end()) return false;
      parsed a;
      if (peek() == 'L') {
        if (!literal(a)) return false;
      } else if (!type(a)) {  // expressions (X), packs (J) and the rest are not decoded
        return false;
      }
      text += (first ? "" : ", ") + a.text;
      first = false;
      if (args) args->push_back(std::move(a));
    }
    text += '>';
    --depth_;
    return true;
  }

  // L <builtin type> [n] <digits> E: a non-type template argument. Not a substitution candidate.
  bool literal(parsed& out) {
    if (!eat("L")) return false;
    parsed t;
    if (peek() == '_' || !builtin(t)) return false;
    std::string value = eat("n") ? "-" : "";
    while (peek() >= '0' && peek() <= '9') value += s_[i_++];
    if (value.empty() || value == "-" || !eat("E")) return false;
    out = {type_code::make(type_class::opaque, 0), t.code.kind() == type_class::boolean ? (value == "0" ? "false" : "true") : value};
    return true;
  }

  bool builtin(parsed& out) {
    struct row {
      std::string_view code;
      type_class kind;
      unsigned size;
      std::string_view text;
    };
    static constexpr row rows[] = {
        {"v", type_class::void_type, 0, "void"},       {"b", type_class::boolean, 1, "bool"},
        {"c", type_class::integer, 1, "char"},         {"a", type_class::integer, 1, "signed char"},
        {"h", type_class::integer, 1, "unsigned char"}, {"s", type_class::integer, 2, "short"},
        {"t", type_class::integer, 2, "unsigned short"}, {"i", type_class::integer, 4, "int"},
        {"j", type_class::integer, 4, "unsigned int"}, {"l", type_class::integer, 8, "long"},
        {"m", type_class::integer, 8, "unsigned long"}, {"x", type_class::integer, 8, "long long"},
        {"y", type_class::integer, 8, "unsigned long long"}, {"n", type_class::integer, 16, "__int128"},
        {"o", type_class::integer, 16, "unsigned __int128"}, {"w", type_class::integer, 4, "wchar_t"},
        {"f", type_class::floating, 4, "float"},       {"d", type_class::floating, 8, "double"},
        {"e", type_class::floating, 16, "long double"}, {"g", type_class::floating, 16, "__float128"},
        {"Dh", type_class::floating, 2, "half"},       {"DF16_", type_class::floating, 2, "_Float16"},
        {"Di", type_class::integer, 4, "char32_t"},    {"Ds", type_class::integer, 2, "char16_t"},
        {"Du", type_class::integer, 1, "char8_t"}};
    for (const auto& r : rows)
      if (eat(r.code)) {
        out = {type_code::make(r.kind, r.size), std::string(r.text)};
        return true;
      }
    return false;
  }

  // A class name as a type: source-name [template-args], N...E, St..., or a substitution [template-args]. Adds the
  // candidates the ABI says.
  bool class_type(parsed& out) {
    if (peek() == 'N') return nested(out, false);
    std::string text;
    if (peek() == 'S' && peek(1) == 't') {
      i_ += 2;
      std::string name;
      if (!source_name(name)) return false;
      text = "std::" + name;
    } else if (peek() == 'S') {
      parsed sub;
      if (!standard_abbreviation(sub) && !substitution(sub)) return false;
      if (peek() != 'I') {  // a substitution alone is not a new candidate
        out = sub;
        return true;
      }
      text = sub.text;
      if (!template_args(text, nullptr)) return false;  // its template-id is one
      out = opaque(text);
      subs_.push_back(out);
      return true;
    } else if (!source_name(text)) {
      return false;
    }
    if (peek() == 'I') {
      subs_.push_back(opaque(text));  // the template's name
      if (!template_args(text, nullptr)) return false;
    }
    out = opaque(text);
    subs_.push_back(out);
    return true;
  }

  // N [K|V|r]* <prefix components> E. For the function's own name, the complete name is no candidate and, when
  // its last component is template arguments, those are what T_ names.
  bool nested(parsed& out, bool function) {
    if (!eat("N")) return false;
    while (peek() == 'K' || peek() == 'V' || peek() == 'r') ++i_;  // a member function's qualifiers
    std::string text;
    bool any = false, last_was_args = false;
    std::vector<parsed> last_args;
    if (eat("St")) text = "std";
    while (!eat("E")) {
      if (at_end()) return false;
      if (peek() == 'I') {
        if (!any) return false;
        last_args.clear();
        if (!template_args(text, &last_args)) return false;
        last_was_args = true;
      } else if (peek() == 'S' && !any && text.empty()) {
        parsed sub;
        if (!substitution(sub)) return false;
        text = sub.text;
        any = true;
        continue;  // not added again
      } else {
        std::string name;
        if (!source_name(name)) return false;
        text += (text.empty() ? "" : "::") + name;
        any = true;
        last_was_args = false;
      }
      if (peek() != 'E' || !function) subs_.push_back(opaque(text));
    }
    if (!any) return false;
    if (function && last_was_args) {
      template_args_ = std::move(last_args);
      templated_ = true;
    }
    out = opaque(text);
    return true;
  }

  bool templated_ = false;

  bool function_name(bool& templated) {
    parsed name;
    if (peek() == 'N') {
      if (!nested(name, true)) return false;
      templated = templated_;
      return true;
    }
    std::string text;
    if (eat("St")) {
      if (!source_name(text)) return false;
      text = "std::" + text;
    } else if (!source_name(text)) {
      return false;
    }
    if (peek() == 'I') {
      subs_.push_back(opaque(text));  // the unscoped template name
      if (!template_args(text, &template_args_)) return false;
      templated = true;
    }
    return true;
  }

  bool type(parsed& out) {
    if (++depth_ > 64 || at_end()) return false;
    bool ok = false;
    const char c = peek();
    if (c == 'P') {
      ++i_;
      parsed inner;
      if (type(inner)) {
        out = {inner.code.pointer_to(), inner.text + "*"};
        subs_.push_back(out);
        ok = true;
      }
    } else if (c == 'K' || c == 'V' || c == 'r') {
      std::string quals;
      while (peek() == 'K' || peek() == 'V' || peek() == 'r') {
        const char q = s_[i_++];
        quals += q == 'K' ? "const" : q == 'V' ? "volatile" : "__restrict__";
        quals += ' ';
      }
      parsed inner;
      if (type(inner)) {
        quals.pop_back();
        out = {inner.code, !inner.text.empty() && inner.text.back() == '*' ? inner.text + " " + quals
                                                                           : quals + " " + inner.text};
        subs_.push_back(out);
        ok = true;
      }
    } else if (c == 'T') {
      ++i_;
      std::size_t index = 0;
      if (!eat("_")) {
        std::size_t n = 0, digits = 0;
        while (peek() >= '0' && peek() <= '9' && digits < 4) n = n * 10 + static_cast<std::size_t>(s_[i_++] - '0'), ++digits;
        if (digits == 0 || !eat("_")) return false;
        index = n + 1;
      }
      if (index < template_args_.size() && peek() != 'I') {
        out = template_args_[index];
        subs_.push_back(out);
        ok = true;
      }
    } else if (c == 'D' && (peek(1) == 'p' || peek(1) == 'v' || peek(1) == 't' || peek(1) == 'T')) {
      ok = false;  // pack expansions, vectors, decltype
    } else if (builtin(out)) {
      ok = true;
    } else if (c == 'N' || c == 'S' || (c >= '0' && c <= '9')) {
      ok = class_type(out);
    }
    --depth_;
    return ok;  // A (arrays), F (functions), M (member pointers), R/O (references), X, J, ...: not decoded
  }
};

}  // namespace

std::optional<std::vector<kernel_parameter_type>> decode_kernel_parameters(std::string_view mangled) noexcept {
  try {
    return decoder(mangled).run();
  } catch (...) {  // an allocation failure: no types, the sizes are still checked
    return std::nullopt;
  }
}

}  // namespace cuasync
