// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/kernel_package.hpp>

#include <cuasync/driver/error.hpp>

#include <fstream>
#include <sstream>

namespace cuasync::jit {

namespace {
constexpr const char* api = "cuasync::jit::kernel_package";

// Where a problem is: "dir/cuasync.manifest:7".
struct position {
  std::string file;
  int line;
  std::string at() const { return file + ":" + std::to_string(line); }
};

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    // A manifest written on Windows ends its lines with \r: whitespace like the others.
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\r') ++j;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

// The rest of the line after the first word (an option or an expression may contain spaces).
std::string rest_of(std::string_view line, const std::string& first) {
  std::size_t i = line.find(first) + first.size();
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  std::size_t end = line.size();
  while (end > i && (line[end - 1] == ' ' || line[end - 1] == '\t' || line[end - 1] == '\r')) --end;
  return std::string(line.substr(i, end - i));
}

// `path` with every symbolic link and `..` resolved (as far as it exists), absolute.
std::filesystem::path resolved(const std::filesystem::path& path, const position& pos, std::source_location where) {
  std::error_code ec;
  std::filesystem::path out = std::filesystem::absolute(path, ec);
  if (!ec) out = std::filesystem::weakly_canonical(out, ec);
  if (ec) cuasync::detail::throw_invalid(api, pos.at() + ": cannot resolve '" + path.string() + "': " + ec.message(),
                                         where);
  return out;
}

std::string read_file(const std::filesystem::path& directory, const std::string& relative, const position& pos,
                      std::source_location where) {
  const std::filesystem::path p(relative);
  if (p.empty() || p.is_absolute())
    cuasync::detail::throw_invalid(api, pos.at() + ": '" + relative + "' must be a path relative to the package", where);
  // Resolved through the filesystem, not lexically: a symbolic link inside the package may point out of it.
  const std::filesystem::path package = resolved(directory, pos, where);
  const std::filesystem::path file = resolved(directory / p, pos, where);
  const std::filesystem::path inside = file.lexically_relative(package);
  if (inside.empty() || *inside.begin() == "..")
    cuasync::detail::throw_invalid(api, pos.at() + ": '" + relative + "' leaves the package's directory ('" +
                                       package.string() + "'; it resolves to '" + file.string() + "')",
                                   where);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))  // a directory opens as an empty stream
    cuasync::detail::throw_invalid(api, pos.at() + ": cannot read '" + (directory / p).string() + "' (no such file)",
                                   where);
  std::ifstream in(file, std::ios::binary);
  if (!in) cuasync::detail::throw_invalid(api, pos.at() + ": cannot read '" + (directory / p).string() + "'", where);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void need(bool ok, const position& pos, const std::string& what, std::source_location where) {
  if (!ok) cuasync::detail::throw_invalid(api, pos.at() + ": " + what, where);
}
}  // namespace

std::vector<std::string> kernel_package::entry_points() const {
  std::vector<std::string> all = kernels;
  all.insert(all.end(), templates.begin(), templates.end());
  return all;
}

kernel_package kernel_package::load(const std::filesystem::path& directory, std::source_location where) {
  const std::filesystem::path manifest = directory / manifest_name;
  std::ifstream in(manifest, std::ios::binary);
  if (!in)
    cuasync::detail::throw_invalid(api, "cannot read '" + manifest.string() + "': a kernel package is a directory with a " +
                                   manifest_name,
                          where);
  std::ostringstream s;
  s << in.rdbuf();
  return parse(s.str(), directory, manifest_name, where);
}

kernel_package kernel_package::parse(std::string_view manifest, const std::filesystem::path& directory,
                                     std::string_view manifest_label, std::source_location where) {
  kernel_package k;
  k.directory = directory;
  position pos{(directory / std::filesystem::path(manifest_label)).string(), 0};
  std::string source_file, source_text;
  std::vector<int> template_lines;
  std::size_t start = 0;
  while (start <= manifest.size()) {
    const std::size_t end = std::min(manifest.find('\n', start), manifest.size());
    std::string_view line = manifest.substr(start, end - start);
    start = end + 1;
    ++pos.line;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const std::vector<std::string> words = split(line);
    if (words.empty()) continue;
    const std::string& key = words[0];
    const std::size_t n = words.size();
    if (key == "package") {
      need(n == 2, pos, "'package' takes one name", where);
      need(k.name.empty(), pos, "a second 'package' entry", where);
      k.name = words[1];
      continue;
    }
    need(!k.name.empty(), pos, "the manifest must begin with 'package NAME' (found '" + key + "')", where);
    if (key == "source") {
      need(n == 2, pos, "'source' takes one file", where);
      need(source_file.empty(), pos, "a second 'source' entry (a package is one program)", where);
      source_file = words[1];
      source_text = read_file(directory, source_file, pos, where);
    } else if (key == "header") {
      need(n == 2 || (n == 4 && words[2] == "as"), pos, "'header' takes a file, optionally 'as NAME'", where);
      k.program.add_header(n == 4 ? words[3] : words[1], read_file(directory, words[1], pos, where));
    } else if (key == "option") {
      need(n >= 2, pos, "'option' takes the option's text", where);
      std::string option = rest_of(line, key);
      const std::string refused = refused_extra_option(option);
      need(refused.empty(), pos, "option " + refused, where);
      k.options.extra.push_back(std::move(option));
    } else if (key == "define") {
      need(n == 2, pos, "'define' takes NAME or NAME=VALUE", where);
      const std::size_t eq = words[1].find('=');
      need(eq != 0, pos, "'define' needs a name before '='", where);
      k.options.define(words[1].substr(0, eq), eq == std::string::npos ? std::string() : words[1].substr(eq + 1));
    } else if (key == "std") {
      need(n == 2 && (words[1] == "c++11" || words[1] == "c++14" || words[1] == "c++17" || words[1] == "c++20"), pos,
           "'std' takes c++11, c++14, c++17 or c++20", where);
      k.options.standard = words[1];
    } else if (key == "kernel") {
      need(n == 2, pos, "'kernel' takes one extern \"C\" name", where);
      k.kernels.push_back(words[1]);
    } else if (key == "template") {
      need(n >= 2, pos, "'template' takes an expression such as scale<float>", where);
      k.templates.push_back(rest_of(line, key));
      template_lines.push_back(pos.line);
    } else {
      cuasync::detail::throw_invalid(api,
                            pos.at() + ": unknown entry '" + key +
                                "' (expected package, source, header, option, define, std, kernel or template)",
                            where);
    }
  }
  pos.line = 0;
  need(!k.name.empty(), pos, "no 'package NAME' entry", where);
  need(!source_file.empty(), pos, "no 'source FILE' entry", where);
  need(!k.kernels.empty() || !k.templates.empty(), pos, "no 'kernel' or 'template' entry: nothing to load", where);
  jit::program p(source_file, std::move(source_text));
  for (const auto& [include_name, contents] : k.program.headers()) p.add_header(include_name, contents);
  for (std::size_t i = 0; i < k.templates.size(); ++i) {
    try {
      p.add_name_expression(k.templates[i], where);
    } catch (const cuda_error& e) {
      cuasync::detail::throw_invalid(api, position{pos.file, template_lines[i]}.at() + ": template '" + k.templates[i] +
                                     "': " + e.detail(), where);
    }
  }
  k.program = std::move(p);
  return k;
}

}  // namespace cuasync::jit
