// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// options.hpp: a command's options on CLI11, the help and usage generated from them, the nearest name to a typo.
#include "options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>

namespace cuasync::tools {
namespace {

constexpr std::size_t columns = 120;

// `words` joined by spaces and wrapped at `columns`, the first line starting at column `at`, the others indented to
// `indent`. A word is never split ("[--watchdog MS]" is one).
std::string wrap(const std::vector<std::string>& words, std::size_t at, std::size_t indent) {
  std::string out;
  std::size_t column = at;
  for (const std::string& w : words) {
    if (column > indent && column + 1 + w.size() > columns) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (!out.empty()) {
      out += ' ';
      ++column;
    }
    out += w;
    column += w.size();
  }
  return out;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// A whole number in [lo, hi]: CLI11 validates the text before converting it, so "x" and "-1" get this message too.
CLI::Validator bounded(unsigned long long lo, unsigned long long hi, const std::string& bad) {
  const std::string need =
      !bad.empty() ? bad : "a number from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, need](std::string& s) -> std::string {
        unsigned long long v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc{} && p == s.data() + s.size() && v >= lo && v <= hi) return {};
        return "needs " + need + ", not '" + s + "'";
      },
      "", "");
}

std::string display_names(const CLI::Option& o) {
  std::string names;
  for (const auto& s : o.get_snames()) names += (names.empty() ? "-" : ", -") + s;
  for (const auto& l : o.get_lnames()) names += (names.empty() ? "--" : ", --") + l;
  return names;
}

bool takes_value(const CLI::Option& o) { return !o.get_type_name().empty(); }  // a flag has no value name
bool repeatable(const CLI::Option& o) { return o.get_items_expected_max() > 1; }  // a vector's option

// The left column of an option's help line: "-o, --out DIR", or a positional's name.
std::string left_column(const CLI::Option& o) {
  if (!o.nonpositional()) return o.get_name(true);
  return display_names(o) + (takes_value(o) ? " " + o.get_type_name() : "");
}

// Edits from `a` to `b`: insertions, deletions, substitutions and swaps of neighbours ("hlep" is 1 from "help").
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

void option_set::flag(const std::string& names, bool& out, const std::string& help) {
  // Given twice it is still on (CLI11 refuses a repeated bool flag by default).
  app_.add_flag(names, out, help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void option_set::text(const std::string& names, std::string& out, const std::string& value_name,
                      const std::string& help) {
  app_.add_option(names, out, help)->type_name(value_name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void option_set::texts(const std::string& names, std::vector<std::string>& out, const std::string& value_name,
                       const std::string& help) {
  app_.add_option(names, out, help)->type_name(value_name)->allow_extra_args(false);
}

void option_set::choices(const std::string& names, std::vector<std::string>& out,
                         const std::vector<std::string>& allowed, const std::string& value_name,
                         const std::string& help) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  app_.add_option(names, out, help)
      ->type_name(value_name)
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [allowed, list](std::string& s) -> std::string {
            if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return {};
            const std::string near = nearest(s, allowed);
            return "needs one of " + list + ", not '" + s + "'" + (near.empty() ? "" : " (did you mean " + near + "?)");
          },
          "", ""));
}

void option_set::number(const std::string& names, std::size_t& out, std::size_t lo, std::size_t hi,
                        const std::string& value_name, const std::string& help, const std::string& bad) {
  app_.add_option(names, out, help)
      ->type_name(value_name)
      ->check(bounded(lo, hi, bad))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void option_set::number(const std::string& names, int& out, int lo, int hi, const std::string& value_name,
                        const std::string& help, const std::string& bad) {
  app_.add_option(names, out, help)
      ->type_name(value_name)
      ->check(bounded(static_cast<unsigned long long>(std::max(lo, 0)), static_cast<unsigned long long>(hi), bad))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void option_set::positional(const std::string& name, std::string& out, const std::string& help) {
  app_.add_option(name, out, help)->required();
}

void option_set::common(bool& json, bool& help) {
  app_.add_flag("--json", json,
                "print one JSON object on standard output for scripts (failures too: {\"error\": {\"command\", "
                "\"status\", \"kind\", \"message\"}}); messages still go to standard error; before the command too "
                "(cuasync --json info)")
      ->group(common_group)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_.add_flag("-h,--help", help, "this help")->group(common_group)->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
}

std::string usage_line(const CLI::App& app) {
  std::vector<std::string> parts{"usage:", "cuasync", app.get_name()};
  for (const CLI::Option* o : app.get_options())
    if (!o->nonpositional()) parts.push_back(o->get_required() ? o->get_name(true) : "[" + o->get_name(true) + "]");
  for (const CLI::Option* o : app.get_options()) {
    if (!o->nonpositional() || o->get_group() == common_group) continue;
    const std::string name = o->get_lnames().empty() ? "-" + o->get_snames().front() : "--" + o->get_lnames().front();
    parts.push_back("[" + name + (takes_value(*o) ? " " + o->get_type_name() : "") + "]" +
                    (repeatable(*o) ? "..." : ""));
  }
  const std::size_t indent = ("usage: cuasync " + app.get_name() + " ").size();
  return wrap(parts, 0, indent) + "\n";
}

std::string reflow(std::string_view text) {
  std::string out;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find("\n\n", start);
    if (end == std::string_view::npos) end = text.size();
    std::string paragraph(text.substr(start, end - start));
    std::replace(paragraph.begin(), paragraph.end(), '\n', ' ');
    if (!out.empty()) out += "\n";
    out += wrap(words_of(paragraph), 0, 0) + "\n";
    start = end + 2;
  }
  return out;
}

std::string option_lines(const CLI::App& app, const std::string& group) {
  std::size_t width = 0;
  for (const CLI::Option* o : app.get_options()) width = std::max(width, left_column(*o).size());
  std::string out;
  for (const CLI::Option* o : app.get_options()) {
    if ((o->get_group() == common_group) != (group == common_group)) continue;
    std::string left = left_column(*o);
    left.resize(width, ' ');
    out += "  " + left + "  " + wrap(words_of(o->get_description()), width + 4, width + 4) + "\n";
  }
  return out;
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string typed = word.substr(0, word.find('='));
  const std::size_t bare = typed.size() - std::min(typed.find_first_not_of('-'), typed.size());
  const std::size_t allowed = bare <= 4 ? 1 : bare <= 8 ? 2 : 3;
  std::string best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& c : candidates) {
    // A prefix of a longer name ("--req" for "--requests") counts as close.
    const std::size_t d = bare >= 3 && c.starts_with(typed) ? 1 : edit_distance(typed, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

}  // namespace cuasync::tools
