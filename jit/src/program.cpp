// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/detail/nvrtc_api.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/program.hpp>
#include <cuasync/trace/hooks.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>

namespace cuasync::jit {

program& program::add_name_expression(std::string expression, std::source_location where) {
  if (expression.empty())
    cuasync::detail::throw_invalid("cuasync::jit::program::add_name_expression",
                                   "empty name expression for program '" + name_ + "'", where);
  if (std::find(name_expressions_.begin(), name_expressions_.end(), expression) == name_expressions_.end())
    name_expressions_.push_back(std::move(expression));
  return *this;
}

program& program::add_graph_conditional_header() {
  // The toolkit's cuda_device_runtime_api.h declares the same (and warns under NVRTC about an internal header it
  // includes); the guard lets a program include both. The call lowers to `.extern .func cudaGraphSetConditional`,
  // which ptxas (NVRTC's, or the driver's for PTX) resolves itself.
  return add_header(graph_conditional_header_name,
                    "#pragma once\n"
                    "#if !defined(__CUDA_DEVICE_RUNTIME_API_H__)\n"
                    "typedef unsigned long long cudaGraphConditionalHandle;\n"
                    "extern \"C\" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle,\n"
                    "                                                     unsigned int value);\n"
                    "#endif\n");
}

const std::string& compiled_program::lowered_name(std::string_view expression, std::source_location where) const {
  for (const auto& [expr, lowered] : lowered_names)
    if (expr == expression) return lowered;
  std::string known;
  for (const auto& [expr, lowered] : lowered_names) known += (known.empty() ? "'" : ", '") + expr + "'";
  throw cuda_error(make_error_code(NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID), "cuasync::jit::compiled_program::lowered_name",
                   "'" + std::string(expression) + "' is not a name expression of program '" + name +
                       "' (registered: " + (known.empty() ? "none" : known) + ")",
                   where);
}

namespace detail {
namespace {

// Line `line` (1-based) of `text`, or nothing.
std::optional<std::string_view> line_of(std::string_view text, long line) {
  std::size_t start = 0;
  for (long i = 1; i < line; ++i) {
    start = text.find('\n', start);
    if (start == std::string_view::npos) return std::nullopt;
    ++start;
  }
  if (start > text.size()) return std::nullopt;
  std::size_t end = text.find('\n', start);
  return text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

}  // namespace

std::string first_error(std::string_view log, const program& p) {
  std::string_view first_line;
  // The first line that reports an error: "name(12): error: ...", "name(3): catastrophic error: ...",
  // "nvrtc: error: ...". Fall back to the log's first line.
  for (std::size_t start = 0; start < log.size();) {
    std::size_t end = log.find('\n', start);
    std::string_view l = log.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (l.find("error") != std::string_view::npos && (l.find(": error") != std::string_view::npos ||
                                                      l.find("catastrophic error") != std::string_view::npos)) {
      first_line = l;
      break;
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (first_line.empty()) {
    const std::size_t end = log.find('\n');
    first_line = log.substr(0, end);
  }
  std::string out(first_line);
  // "file(line): ..." → quote that line from the source or the in-memory header named file.
  const std::size_t open = first_line.find('(');
  const std::size_t close = first_line.find("): ", open == std::string_view::npos ? 0 : open);
  if (open == std::string_view::npos || close == std::string_view::npos) return out;
  long line = 0;
  auto [ptr, ec] = std::from_chars(first_line.data() + open + 1, first_line.data() + close, line);
  if (ec != std::errc{} || ptr != first_line.data() + close || line <= 0) return out;
  const std::string_view file = first_line.substr(0, open);
  const std::string* text = nullptr;
  if (file == p.name()) {
    text = &p.source();
  } else if (auto h = p.headers().find(std::string(file)); h != p.headers().end()) {
    text = &h->second;
  }
  if (!text) return out;
  if (auto src = line_of(*text, line)) out += "\n    " + std::to_string(line) + " | " + std::string(*src);
  return out;
}

}  // namespace detail

compiled_program compile(const program& p, const target& t, const compile_options& o, const std::string& pch_dir,
                         std::source_location where) {
  detail::nvrtc();  // before the arguments: a missing NVRTC is reported as such, not through the include path
  return detail::compile_with_arguments(p, t, o.arguments(t, pch_dir, where), where);
}

compiled_program detail::compile_with_arguments(const program& p, const target& t,
                                                const std::vector<std::string>& args, std::source_location where) {
  const auto& n = detail::nvrtc();
  const auto& info = nvrtc_library();

  std::vector<const char*> header_contents, header_names;
  for (const auto& [name, contents] : p.headers()) {
    header_names.push_back(name.c_str());
    header_contents.push_back(contents.c_str());
  }
  nvrtcProgram prog = nullptr;
  detail::check_nvrtc(n.nvrtcCreateProgram(&prog, p.source().c_str(), p.name().c_str(),
                                           static_cast<int>(header_names.size()), header_contents.data(),
                                           header_names.data()),
                      "nvrtcCreateProgram", p.name(), where);
  auto destroy = [&n](nvrtcProgram* pr) { n.nvrtcDestroyProgram(pr); };
  std::unique_ptr<nvrtcProgram, decltype(destroy)> guard(&prog, destroy);

  for (const auto& expr : p.name_expressions())
    detail::check_nvrtc(n.nvrtcAddNameExpression(prog, expr.c_str()), "nvrtcAddNameExpression", p.name(), where);

  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  trace::host_call watched(trace::watch_only(), trace::category::jit_compile, "nvrtcCompileProgram", 0, 0, &where);
  const nvrtcResult result = n.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  std::string log;
  std::size_t log_size = 0;
  if (n.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (n.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  if (result != NVRTC_SUCCESS) {
    std::string first = detail::first_error(log, p);
    if (first.empty()) first = make_error_code(result).message();
    throw compile_error(result, p.name(), args, std::move(log), std::move(first), where);
  }

  compiled_program out;
  out.name = p.name();
  out.target = t;
  out.log = std::move(log);
  out.nvrtc_version = info.version();
  auto fetch = [&](auto size_fn, auto get_fn, const char* api) {
    std::size_t size = 0;
    detail::check_nvrtc((n.*size_fn)(prog, &size), api, p.name(), where);
    std::vector<char> buf(size);
    if (size) detail::check_nvrtc((n.*get_fn)(prog, buf.data()), api, p.name(), where);
    if (t.kind == output_kind::ptx)
      while (!buf.empty() && buf.back() == '\0') buf.pop_back();
    out.image.resize(buf.size());
    std::memcpy(out.image.data(), buf.data(), buf.size());
  };
  using E = detail::nvrtc_entry_points;
  switch (t.kind) {
    case output_kind::cubin: fetch(&E::nvrtcGetCUBINSize, &E::nvrtcGetCUBIN, "nvrtcGetCUBIN"); break;
    case output_kind::ptx: fetch(&E::nvrtcGetPTXSize, &E::nvrtcGetPTX, "nvrtcGetPTX"); break;
    case output_kind::ltoir: fetch(&E::nvrtcGetLTOIRSize, &E::nvrtcGetLTOIR, "nvrtcGetLTOIR"); break;
  }
  if (out.image.empty())
    detail::throw_nvrtc(NVRTC_ERROR_INTERNAL_ERROR, "nvrtcCompileProgram",
                        "program '" + p.name() + "' compiled for " + t.to_string() + " but produced no image", where);
  for (const auto& expr : p.name_expressions()) {
    const char* lowered = nullptr;
    detail::check_nvrtc(n.nvrtcGetLoweredName(prog, expr.c_str(), &lowered), "nvrtcGetLoweredName", p.name(),
                        where);
    out.lowered_names.emplace_back(expr, lowered);
  }
  return out;
}

}  // namespace cuasync::jit
