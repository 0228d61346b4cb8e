// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/module.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/scope.hpp>

#include "kernel_grid_dependency.hpp"
#include "kernel_lookup.hpp"
#include "kernel_param_counts.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cuasync {

using detail::driver;
using detail::read_at;
using detail::throw_cu;

namespace detail {
struct module_state {
  CUmodule handle = nullptr;
  context_ref ctx;
  std::string label;
  std::mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<kernel_info>> kernels;  // by symbol; never erased
  std::unordered_map<std::string, std::string> aliases;                    // name expression -> symbol
  std::unordered_map<std::string, std::size_t> param_counts;               // by symbol, as the image says
  std::unordered_set<std::string> grid_dependency_waits;                   // kernels the image shows waiting (PDL)
};

namespace {
// Kernels of loaded modules by function handle, for known_kernel(): added when a kernel is first asked for, removed
// when its module unloads (a later module may get the same handle).
struct known_kernels {
  std::mutex mutex;
  std::unordered_map<CUfunction, const kernel_info*> by_function;
};
known_kernels& known() {
  static known_kernels* k = new known_kernels;  // never destroyed: modules may unload during static destruction
  return *k;
}
}  // namespace

void remember_kernel(const kernel_info* k) {
  auto& known_ = known();
  std::lock_guard lock(known_.mutex);
  known_.by_function.insert_or_assign(k->function, k);
}

void forget_kernel(const kernel_info* k) noexcept {
  auto& known_ = known();
  std::lock_guard lock(known_.mutex);
  if (auto it = known_.by_function.find(k->function); it != known_.by_function.end() && it->second == k)
    known_.by_function.erase(it);
}

std::unique_ptr<kernel_info> describe_kernel(CUfunction function, std::string name, const std::string& symbol,
                                             context_ref ctx,
                                             const std::unordered_map<std::string, std::size_t>& param_counts,
                                             std::source_location where) {
  const auto& d = driver();
  auto info = std::make_unique<kernel_info>();
  info->function = function;
  info->name = std::move(name);
  info->ctx = ctx;
  // The count from the image where it says; otherwise probed (an index past the last one is refused).
  const auto counted_at = param_counts.find(symbol);
  const bool counted = counted_at != param_counts.end();
  for (std::size_t i = 0; !counted || i < counted_at->second; ++i) {
    std::size_t offset = 0, size = 0;
    CUresult r = d.cuFuncGetParamInfo(function, i, &offset, &size);
    if (!counted && r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
    if (r != CUDA_SUCCESS)
      throw_cu(r, "cuFuncGetParamInfo", "parameter " + std::to_string(i) + " of kernel '" + symbol + "'", where);
    info->params.push_back({offset, size});
    if (i < 8) info->flight_param_sizes |= std::uint64_t(std::min<std::size_t>(size, 255)) << (8 * i);
  }
  if (symbol.starts_with("_Z"))
    if (auto types = decode_kernel_parameters(symbol); types && types->size() == info->params.size())
      for (auto& t : *types) {
        info->param_types.push_back(t.code);
        info->param_type_names.push_back(std::move(t.spelling));
      }
  info->device = &ctx.device(where).properties(where);
  detail::check(d.cuFuncGetAttribute(&info->max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
                "cuFuncGetAttribute", where);
  return info;
}

const kernel_info* known_kernel(CUfunction f) noexcept {
  auto& k = known();
  std::lock_guard lock(k.mutex);
  auto it = k.by_function.find(f);
  return it == k.by_function.end() ? nullptr : it->second;
}
}  // namespace detail

image_format detect_image_format(std::span<const std::byte> image) noexcept {
  if (image.size() >= 4) {
    const auto* b = reinterpret_cast<const unsigned char*>(image.data());
    if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') return image_format::cubin;
    std::uint32_t magic = 0;
    std::memcpy(&magic, b, 4);
    if (magic == 0xBA55ED50u) return image_format::fatbin;
  }
  // PTX is text with a .version directive near the top.
  const std::string_view head(reinterpret_cast<const char*>(image.data()), std::min<std::size_t>(image.size(), 8192));
  if (head.find(".version") != std::string_view::npos && head.find(".target") != std::string_view::npos)
    return image_format::ptx;
  return image_format::unknown;
}

const char* to_string(image_format f) noexcept {
  switch (f) {
    case image_format::cubin: return "CUBIN";
    case image_format::fatbin: return "fatbin";
    case image_format::ptx: return "PTX";
    case image_format::unknown: break;
  }
  return "unknown";
}

namespace {

// The driver trusts a module image's internal offsets: a truncated or corrupt CUBIN can crash it (seen on driver
// 580). So the structure is checked here first: every table and section must lie inside the image.
// Returns what is wrong, or an empty string.
std::string structural_problem(std::span<const std::byte> image, image_format format) {
  const std::size_t n = image.size();
  auto inside = [n](std::uint64_t offset, std::uint64_t size) { return offset <= n && size <= n - offset; };
  if (format == image_format::cubin) {
    if (n < 64) return "shorter than an ELF header";
    const auto* ident = reinterpret_cast<const unsigned char*>(image.data());
    if (ident[4] != 2 /*ELFCLASS64*/ || ident[5] != 1 /*little endian*/) return "not a 64-bit little-endian ELF";
    if (read_at<std::uint16_t>(image, 18) != 190 /*EM_CUDA*/) return "an ELF file for another machine than CUDA";
    const auto phoff = read_at<std::uint64_t>(image, 32), shoff = read_at<std::uint64_t>(image, 40);
    const auto phentsize = read_at<std::uint16_t>(image, 54), phnum = read_at<std::uint16_t>(image, 56);
    const auto shentsize = read_at<std::uint16_t>(image, 58), shnum = read_at<std::uint16_t>(image, 60);
    if (!inside(phoff, std::uint64_t{phentsize} * phnum)) return "program headers outside the image (truncated?)";
    if (!inside(shoff, std::uint64_t{shentsize} * shnum)) return "section headers outside the image (truncated?)";
    if (shnum && shentsize < 64) return "malformed section header table";
    for (std::uint16_t i = 0; i < shnum; ++i) {
      const std::size_t sh = shoff + std::size_t{i} * shentsize;
      const auto type = read_at<std::uint32_t>(image, sh + 4);
      const auto offset = read_at<std::uint64_t>(image, sh + 24), size = read_at<std::uint64_t>(image, sh + 32);
      if (type != 8 /*SHT_NOBITS*/ && !inside(offset, size))
        return "section " + std::to_string(i) + " lies outside the image (truncated?)";
    }
    if (phnum && phentsize < 56) return "malformed program header table";
    for (std::uint16_t i = 0; i < phnum; ++i) {
      const std::size_t ph = phoff + std::size_t{i} * phentsize;
      if (!inside(read_at<std::uint64_t>(image, ph + 8), read_at<std::uint64_t>(image, ph + 32)))
        return "segment " + std::to_string(i) + " lies outside the image (truncated?)";
    }
  } else if (format == image_format::fatbin) {
    // struct { u32 magic; u16 version; u16 header_size; u64 fat_size; }
    if (n < 16) return "shorter than a fatbin header";
    const auto header_size = read_at<std::uint16_t>(image, 6);
    const auto fat_size = read_at<std::uint64_t>(image, 8);
    if (header_size < 16 || !inside(header_size, fat_size)) return "fatbin payload extends past the image (truncated?)";
  }
  return {};
}

}  // namespace

CUmodule module_ref::get() const noexcept { return state_ ? state_->handle : nullptr; }
context_ref module_ref::context() const noexcept { return state_ ? state_->ctx : context_ref{}; }
const std::string& module_ref::label() const noexcept {
  static const std::string none = "<none>";
  return state_ ? state_->label : none;
}

void module_ref::add_name_alias(std::string expression, std::string lowered_name, std::source_location where) const {
  if (!state_)
    detail::throw_invalid("cuasync::module_ref::add_name_alias",
                          "empty module (alias '" + expression + "' for '" + lowered_name + "')", where);
  std::lock_guard lock(state_->mutex);
  state_->aliases.insert_or_assign(std::move(expression), std::move(lowered_name));
}

kernel_ref module_ref::kernel(std::string_view name, std::source_location where) const {
  if (!state_) detail::throw_invalid("cuasync::module_ref::kernel", "empty module", where);
  std::lock_guard lock(state_->mutex);
  std::string symbol(name);
  if (auto a = state_->aliases.find(symbol); a != state_->aliases.end()) symbol = a->second;
  if (auto it = state_->kernels.find(symbol); it != state_->kernels.end()) return kernel_ref(it->second.get());

  const auto& d = driver();
  CUfunction function = nullptr;
  scoped_context guard(state_->ctx, where);
  if (CUresult r = d.cuModuleGetFunction(&function, state_->handle, symbol.c_str()); r != CUDA_SUCCESS)
    throw_cu(r, "cuModuleGetFunction",
             "kernel '" + symbol + "' in module '" + state_->label + "'" +
                 (r == CUDA_ERROR_NOT_FOUND ? ": no such kernel (C++ kernels need extern \"C\", their mangled name, "
                                              "or a name expression registered at compile time)"
                                            : ""),
             where);
  auto info = detail::describe_kernel(function, std::string(name), symbol, state_->ctx, state_->param_counts, where);
  info->waits_on_grid_dependency = state_->grid_dependency_waits.contains(symbol);
  auto* raw = info.get();
  detail::remember_kernel(raw);
  state_->kernels.emplace(std::move(symbol), std::move(info));
  return kernel_ref(raw);
}

namespace detail {
image_format check_image(std::span<const std::byte> image, const std::string& label, const char* api,
                         std::source_location where) {
  if (image.empty() || !image.data()) detail::throw_invalid(api, "empty module image '" + label + "'", where);
  const image_format format = detect_image_format(image);
  if (format == image_format::unknown)
    detail::throw_invalid(api,
                          "module image '" + label + "' (" + std::to_string(image.size()) +
                              " bytes) is neither CUBIN (ELF), fatbin nor PTX: corrupt or not a CUDA image",
                          where);
  if (std::string problem = structural_problem(image, format); !problem.empty())
    throw cuda_error(make_error_code(CUDA_ERROR_INVALID_IMAGE), api,
                     std::string(to_string(format)) + " image '" + label + "' of " + std::to_string(image.size()) +
                         " bytes is corrupt: " + problem,
                     where);
  return format;
}

std::vector<std::uint64_t> aligned_copy(std::span<const std::byte> image) {
  std::vector<std::uint64_t> copy((image.size() + 8) / 8 + 1, 0);
  std::memcpy(copy.data(), image.data(), image.size());
  return copy;
}
}  // namespace detail

module module::load(context_ref ctx, std::span<const std::byte> image, std::string label,
                   std::source_location where) {
  constexpr const char* api = "cuasync::module::load";
  const image_format format = detail::check_image(image, label, api, where);
  if (!ctx) detail::throw_invalid(api, "empty context", where);
  // The driver wants PTX NUL-terminated and binaries aligned: load from a private, aligned copy.
  std::vector<std::uint64_t> copy = detail::aligned_copy(image);

  std::vector<char> error_log(16384, '\0'), info_log(16384, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size() - 1), info_log.data(),
                    reinterpret_cast<void*>(info_log.size() - 1)};
  auto state = std::make_unique<detail::module_state>();
  state->ctx = ctx;
  state->label = std::move(label);
  state->param_counts = detail::kernel_param_counts(image, format);
  state->grid_dependency_waits = detail::grid_dependency_kernels(image, format);
  scoped_context guard(ctx, where);
  // The driver JIT-compiles PTX here (milliseconds to seconds): the watchdog names the call on an io thread, and the
  // timeline shows the load under the module's name.
  trace::host_call watched(trace::active_hooks() & (trace::hook::watch | trace::hook::nvtx),
                           trace::category::module_load, "cuModuleLoadDataEx", image.size(), 0, &where);
  std::optional<trace::scope> traced;
  if (trace::enabled()) [[unlikely]]
    traced.emplace(trace::category::module_load,
                   "load " + state->label + " (" + std::string(to_string(format)) + ")", image.size());
  if (CUresult r = driver().cuModuleLoadDataEx(&state->handle, copy.data(), 4, options, values); r != CUDA_SUCCESS) {
    std::string what = std::string(to_string(format)) + " image '" + state->label + "' of " +
                       std::to_string(image.size()) + " bytes on device " + std::to_string(ctx.device_ordinal());
    if (error_log[0]) what += "; JIT log:\n" + std::string(error_log.data());
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      what += " (the PTX is newer than this driver can compile: compile for an older PTX ISA or update the driver)";
    throw_cu(r, "cuModuleLoadDataEx", std::move(what), where);
  }
  return module(state.release());
}

module module::load_file(context_ref ctx, const std::filesystem::path& path, std::source_location where) {
  constexpr const char* api = "cuasync::module::load_file";
  // A directory opens as a stream on Linux and only its read fails (std::ios_base::failure from the stream buffer).
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw cuda_error(make_error_code(CUDA_ERROR_FILE_NOT_FOUND), api,
                     "'" + path.string() + "' is a directory, not a module image", where);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw cuda_error(make_error_code(CUDA_ERROR_FILE_NOT_FOUND), api, "cannot open '" + path.string() + "'", where);
  std::vector<char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw cuda_error(make_error_code(CUDA_ERROR_FILE_NOT_FOUND), api,
                     "cannot read '" + path.string() + "': " + e.what(), where);
  }
  return load(ctx, std::as_bytes(std::span(bytes)), path.filename().string(), where);
}

module::module(module&& o) noexcept : module_ref(std::exchange(o.state_, nullptr)) {}

module& module::operator=(module&& o) noexcept {
  if (this != &o) {
    this->~module();
    state_ = std::exchange(o.state_, nullptr);
  }
  return *this;
}

void module::abandon() noexcept {
  if (state_) state_->handle = nullptr;
}

module::~module() {
  if (!state_) return;
  for (const auto& [symbol, info] : state_->kernels) detail::forget_kernel(info.get());
  trace::host_call watched(trace::watch_only(), trace::category::module_load, "cuModuleUnload");
  if (state_->handle)
    detail::release_nothrow(state_->ctx.get(), "cuModuleUnload", state_->handle,
                            [&](const detail::driver_entry_points& d) { return d.cuModuleUnload(state_->handle); });
  delete state_;
  state_ = nullptr;
}

}  // namespace cuasync
