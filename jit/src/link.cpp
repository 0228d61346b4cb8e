// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// nvJitLink's link of LTO-IR, PTX and CUBIN parts into one CUBIN, with the checks that give clear errors before it.
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/link.hpp>
#include <cuasync/trace/hooks.hpp>

#include "nvjitlink_api.hpp"

#include <algorithm>
#include <cstring>

namespace cuasync::jit {

link_part::link_part(const compile_result& r) noexcept : program(r.program) {}

link_part link_part::from_image(std::string name, target t, std::span<const std::byte> image) {
  auto p = std::make_shared<compiled_program>();
  p->name = std::move(name);
  p->target = t;
  p->image.assign(image.begin(), image.end());
  return link_part(std::shared_ptr<const compiled_program>(std::move(p)));
}

void link_options::check(std::source_location where) const {
  constexpr const char* api = "cuasync::jit::link_options";
  if (optimization_level && (*optimization_level < 0 || *optimization_level > 3))
    cuasync::detail::throw_invalid(api, "optimization_level " + std::to_string(*optimization_level) +
                                            " is outside 0..3", where);
  if (max_registers && *max_registers <= 0)
    cuasync::detail::throw_invalid(api, "max_registers " + std::to_string(*max_registers) + " is not positive",
                                   where);
  for (const auto& e : extra) {
    const std::string_view v(e);
    if (v.starts_with("-arch") || v.starts_with("--arch"))
      cuasync::detail::throw_invalid(api, "'" + e + "' in extra: the link's architecture is its arch argument",
                                     where);
    if (v == "-lto" || v == "--lto")
      cuasync::detail::throw_invalid(api, "'" + e + "' in extra: -lto is added when a part is LTO-IR", where);
  }
}

std::vector<std::string> link_options::arguments(int arch, bool lto, std::source_location where) const {
  check(where);
  std::vector<std::string> a{"-arch=sm_" + std::to_string(arch)};
  if (lto) a.emplace_back("-lto");
  if (optimization_level) a.push_back("-O" + std::to_string(*optimization_level));
  if (line_info) a.emplace_back("-lineinfo");
  if (debug) a.emplace_back("-g");
  if (max_registers) a.push_back("-maxrregcount=" + std::to_string(*max_registers));
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

namespace {
std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}


// The first line of the log that says "error" (the log's first line when none does).
std::string first_error_line(const std::string& log) {
  std::size_t start = 0, first_end = log.find('\n');
  for (std::size_t end; start < log.size(); start = end + 1) {
    end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    const std::string_view line(log.data() + start, end - start);
    if (line.find("rror") != std::string_view::npos) return std::string(line);
  }
  return log.substr(0, first_end);
}
}  // namespace

link_error::link_error(int result, std::string link_name, std::vector<std::string> options, std::string log,
                       std::string what, std::source_location where)
    : cuda_error({result, nvjitlink_category()}, "nvJitLinkComplete", std::move(what) + "\noptions: " + join(options, " "),
                 where),
      link_name_(std::move(link_name)),
      options_(std::move(options)),
      log_(std::move(log)) {}

std::string default_link_name(std::span<const link_part> parts) {
  std::string name;
  for (const auto& p : parts) name += (name.empty() ? "" : "+") + (p.program ? p.program->name : std::string("?"));
  return name;
}

compiled_program link(std::span<const link_part> parts, int arch, const link_options& o, std::string name,
                      std::source_location where) {
  constexpr const char* api = "cuasync::jit::link";
  if (name.empty()) name = default_link_name(parts);
  if (parts.empty()) cuasync::detail::throw_invalid(api, "link '" + name + "' has no parts", where);
  if (arch <= 0) cuasync::detail::throw_invalid(api, "link '" + name + "': arch " + std::to_string(arch), where);
  bool lto = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const compiled_program* p = parts[i].program.get();
    const std::string which = "part " + std::to_string(i) + (p ? " ('" + p->name + "')" : "") + " of link '" + name + "'";
    if (!p || p->image.empty()) cuasync::detail::throw_invalid(api, which + " is empty", where);
    if (p->target.kind == output_kind::cubin ? p->target.arch != arch : p->target.arch > arch)
      cuasync::detail::throw_invalid(api, which + " is " + p->target.to_string() + ", which cannot be linked for sm_" +
                                              std::to_string(arch) +
                                              (p->target.kind == output_kind::cubin
                                                   ? " (a CUBIN links only for its own architecture)"
                                                   : " (compile it for compute_" + std::to_string(arch) + " or older)"),
                                     where);
    lto = lto || p->target.kind == output_kind::ltoir;
  }
  const std::vector<std::string> args = o.arguments(arch, lto, where);
  const auto& n = detail::nvjitlink();
  const auto& info = nvjitlink_library();

  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  nvJitLinkHandle handle = nullptr;
  if (nvJitLinkResult r = n.nvJitLinkCreate(&handle, static_cast<std::uint32_t>(argv.size()), argv.data());
      r != NVJITLINK_SUCCESS)
    throw link_error(r, name, args, {}, "nvJitLinkCreate refused the options of link '" + name + "'", where);
  auto destroy = [&n](nvJitLinkHandle* h) { n.nvJitLinkDestroy(h); };
  std::unique_ptr<nvJitLinkHandle, decltype(destroy)> guard(&handle, destroy);
  auto read_log = [&](auto size_fn, auto get_fn) {
    std::size_t size = 0;
    std::string log;
    if ((n.*size_fn)(handle, &size) == NVJITLINK_SUCCESS && size > 1) {
      log.resize(size);
      if ((n.*get_fn)(handle, log.data()) != NVJITLINK_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    return log;
  };
  using E = detail::nvjitlink_entry_points;
  auto fail = [&](nvJitLinkResult r, std::string what) {
    std::string log = read_log(&E::nvJitLinkGetErrorLogSize, &E::nvJitLinkGetErrorLog);
    if (!log.empty()) what += ":\n" + first_error_line(log);
    throw link_error(r, name, args, std::move(log), std::move(what), where);
  };
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const compiled_program& p = *parts[i].program;
    const nvJitLinkInputType type = p.target.kind == output_kind::ltoir ? NVJITLINK_INPUT_LTOIR
                                    : p.target.kind == output_kind::ptx ? NVJITLINK_INPUT_PTX
                                                                        : NVJITLINK_INPUT_CUBIN;
    // PTX goes in NUL-terminated (the compiler keeps it without the NUL).
    std::string ptx;
    const void* data = p.image.data();
    std::size_t size = p.image.size();
    if (type == NVJITLINK_INPUT_PTX) {
      ptx.assign(p.text());
      data = ptx.c_str();
      size = ptx.size() + 1;
    }
    if (nvJitLinkResult r = n.nvJitLinkAddData(handle, type, data, size, p.name.c_str()); r != NVJITLINK_SUCCESS)
      fail(r, "link '" + name + "' refused part " + std::to_string(i) + " ('" + p.name + "', " +
                  p.target.to_string() + ")");
  }
  trace::host_call watched(trace::watch_only(), trace::category::jit_compile, "nvJitLinkComplete", 0, 0, &where);
  if (nvJitLinkResult r = n.nvJitLinkComplete(handle); r != NVJITLINK_SUCCESS)
    fail(r, "link '" + name + "' of " + std::to_string(parts.size()) + " part(s) for sm_" + std::to_string(arch) +
                " failed");

  compiled_program out;
  out.name = std::move(name);
  out.target = {output_kind::cubin, arch};
  out.nvrtc_version = info.version();
  out.log = read_log(&E::nvJitLinkGetInfoLogSize, &E::nvJitLinkGetInfoLog);
  std::size_t size = 0;
  if (nvJitLinkResult r = n.nvJitLinkGetLinkedCubinSize(handle, &size); r != NVJITLINK_SUCCESS || size == 0)
    fail(r == NVJITLINK_SUCCESS ? NVJITLINK_ERROR_INTERNAL : r, "link '" + out.name + "' produced no CUBIN");
  out.image.resize(size);
  if (nvJitLinkResult r = n.nvJitLinkGetLinkedCubin(handle, out.image.data()); r != NVJITLINK_SUCCESS)
    fail(r, "nvJitLinkGetLinkedCubin of link '" + out.name + "'");
  for (const auto& part : parts)
    for (const auto& names : part.program->lowered_names)
      if (std::none_of(out.lowered_names.begin(), out.lowered_names.end(),
                       [&](const auto& have) { return have.first == names.first; }))
        out.lowered_names.push_back(names);
  return out;
}

}  // namespace cuasync::jit
