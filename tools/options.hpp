// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// A command's options, declared on its CLI11 parser (CLI11 stays inside options.cpp and main.cpp, the files that
// parse): flags, values, bounded numbers, repeatable values and positionals, each with the value's name and a line
// of help. The help and the usage line are generated from these declarations, so they cannot drift from what is
// parsed; the nearest name for a mistyped command or option is found here too.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace cuasync::tools {

class option_set {
 public:
  explicit option_set(CLI::App& app) noexcept : app_(app) {}

  //! `names` as CLI11 spells them: "--ptx", "-o,--output" (both forms accepted; --output=FILE too).
  void flag(const std::string& names, bool& out, const std::string& help);
  //! A value: `--out DIR` or `--out=DIR` (given twice, the last counts, as for every option here but the
  //! repeatable ones).
  void text(const std::string& names, std::string& out, const std::string& value_name, const std::string& help);
  //! A value that may be given more than once, each time with one value (`-D A -D B`).
  void texts(const std::string& names, std::vector<std::string>& out, const std::string& value_name,
             const std::string& help);
  //! The same, each value one of `choices` (anything else is a usage error naming them).
  void choices(const std::string& names, std::vector<std::string>& out, const std::vector<std::string>& allowed,
               const std::string& value_name, const std::string& help);
  //! A whole number from `lo` to `hi`; anything else is a usage error: "needs `bad`" when given, else "needs a
  //! number from lo to hi".
  void number(const std::string& names, std::size_t& out, std::size_t lo, std::size_t hi,
              const std::string& value_name, const std::string& help, const std::string& bad = {});
  void number(const std::string& names, int& out, int lo, int hi, const std::string& value_name,
              const std::string& help, const std::string& bad = {});
  //! An argument without an option name (the command's FILE); at most one (more is a usage error).
  void positional(const std::string& name, std::string& out, const std::string& help);
  //! --json and -h/--help, which every command takes (listed apart in the help).
  void common(bool& json, bool& help);

 private:
  CLI::App& app_;
};

//! The options group every command shares (its title in the help).
inline constexpr const char* common_group = "options of every command";

//! "usage: cuasync NAME POSITIONAL [--opt VALUE]..." from the declared options (not those of every command),
//! wrapped at 120 columns.
std::string usage_line(const CLI::App& app);
//! `text` reflowed at 120 columns: its lines joined, paragraphs (split by an empty line) kept apart.
std::string reflow(std::string_view text);
//! The option list of one group: "  -o, --out DIR   help", the help wrapped at 120 columns.
std::string option_lines(const CLI::App& app, const std::string& group);

//! The candidate nearest to a mistyped `word` ("infoo" -> "info", "--slotz" -> "--slots"; an "=VALUE" tail is
//! ignored), or empty when none is close enough to be what was meant.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
//! The option names of `app` (long and short, with their dashes), for `nearest`.
std::vector<std::string> option_names(const CLI::App& app);

}  // namespace cuasync::tools
