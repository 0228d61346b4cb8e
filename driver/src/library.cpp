// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/library.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/scope.hpp>

#include "kernel_lookup.hpp"
#include "kernel_param_counts.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

namespace detail {
struct library_state {
  CUlibrary handle = nullptr;
  std::string label;
  std::mutex mutex;
  struct one_kernel {
    CUkernel kernel = nullptr;
    std::map<unsigned long long, std::unique_ptr<kernel_info>> in_context;  // by context id; never erased
  };
  std::unordered_map<std::string, one_kernel> kernels;       // by symbol
  std::unordered_map<std::string, std::string> aliases;      // name expression -> symbol
  std::unordered_map<std::string, std::size_t> param_counts;  // by symbol, as the image says
  std::set<unsigned long long> contexts;
  library_stats stats;
};
}  // namespace detail

library library::load(std::span<const std::byte> image, std::string label, std::source_location where) {
  constexpr const char* api = "cuasync::library::load";
  const image_format format = detail::check_image(image, label, api, where);
  std::vector<std::uint64_t> copy = detail::aligned_copy(image);
  std::vector<char> error_log(16384, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(error_log.size() - 1)};
  auto state = std::make_unique<detail::library_state>();
  state->label = std::move(label);
  state->param_counts = detail::kernel_param_counts(image, format);
  trace::host_call watched(trace::active_hooks() & (trace::hook::watch | trace::hook::nvtx),
                           trace::category::module_load, "cuLibraryLoadData", image.size(), 0, &where);
  std::optional<trace::scope> traced;
  if (trace::enabled()) [[unlikely]]
    traced.emplace(trace::category::module_load,
                   "load library " + state->label + " (" + std::string(to_string(format)) + ")", image.size());
  if (CUresult r = driver(where).cuLibraryLoadData(&state->handle, copy.data(), options, values, 2, nullptr,
                                                   nullptr, 0);
      r != CUDA_SUCCESS) {
    std::string what = std::string(to_string(format)) + " image '" + state->label + "' of " +
                       std::to_string(image.size()) + " bytes as a context-independent library";
    if (error_log[0]) what += "; JIT log:\n" + std::string(error_log.data());
    throw_cu(r, "cuLibraryLoadData", std::move(what), where);
  }
  return library(state.release());
}

kernel_ref library::kernel(context_ref ctx, std::string_view name, std::source_location where) const {
  constexpr const char* api = "cuasync::library::kernel";
  if (!state_) detail::throw_invalid(api, "empty library (kernel '" + std::string(name) + "')", where);
  if (!ctx) detail::throw_invalid(api, "empty context (kernel '" + std::string(name) + "')", where);
  const unsigned long long id = ctx.id(where);
  std::lock_guard lock(state_->mutex);
  std::string symbol(name);
  if (auto a = state_->aliases.find(symbol); a != state_->aliases.end()) symbol = a->second;
  auto& k = state_->kernels[symbol];
  if (auto it = k.in_context.find(id); it != k.in_context.end()) [[likely]] return kernel_ref(it->second.get());
  const auto& d = driver();
  if (!k.kernel) {
    if (CUresult r = d.cuLibraryGetKernel(&k.kernel, state_->handle, symbol.c_str()); r != CUDA_SUCCESS) {
      state_->kernels.erase(symbol);
      throw_cu(r, "cuLibraryGetKernel",
               "kernel '" + symbol + "' in library '" + state_->label + "'" +
                   (r == CUDA_ERROR_NOT_FOUND ? ": no such kernel (C++ kernels need extern \"C\", their mangled "
                                                "name, or a name expression registered at compile time)"
                                              : ""),
               where);
    }
    ++state_->stats.kernels;
  }
  scoped_context guard(ctx, where);
  CUfunction function = nullptr;
  if (CUresult r = d.cuKernelGetFunction(&function, k.kernel); r != CUDA_SUCCESS)
    throw_cu(r, "cuKernelGetFunction",
             "kernel '" + symbol + "' of library '" + state_->label + "' in the context of device " +
                 std::to_string(ctx.device_ordinal()),
             where);
  ++state_->stats.functions;
  if (state_->contexts.insert(id).second) ++state_->stats.contexts;
  auto info = detail::describe_kernel(function, std::string(name), symbol, ctx, state_->param_counts, where);
  auto* raw = info.get();
  detail::remember_kernel(raw);
  k.in_context.emplace(id, std::move(info));
  return kernel_ref(raw);
}

void library::add_name_alias(std::string expression, std::string lowered_name, std::source_location where) const {
  if (!state_)
    detail::throw_invalid("cuasync::library::add_name_alias",
                          "empty library (alias '" + expression + "' for '" + lowered_name + "')", where);
  std::lock_guard lock(state_->mutex);
  state_->aliases.insert_or_assign(std::move(expression), std::move(lowered_name));
}

CUlibrary library::get() const noexcept { return state_ ? state_->handle : nullptr; }

const std::string& library::label() const noexcept {
  static const std::string none = "<none>";
  return state_ ? state_->label : none;
}

library_stats library::stats() const noexcept {
  if (!state_) return {};
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

library::library(library&& o) noexcept : state_(std::exchange(o.state_, nullptr)) {}

library& library::operator=(library&& o) noexcept {
  if (this != &o) {
    this->~library();
    state_ = std::exchange(o.state_, nullptr);
  }
  return *this;
}

library::~library() {
  if (!state_) return;
  for (const auto& [symbol, k] : state_->kernels)
    for (const auto& [id, info] : k.in_context) detail::forget_kernel(info.get());
  trace::host_call watched(trace::watch_only(), trace::category::module_load, "cuLibraryUnload");
  // Needs no context: the library is the process's, so a failure (tried twice) has no context to be deferred to.
  if (const auto* d = detail::driver_if_loaded(); d && state_->handle) {
    auto unload = [&](const detail::driver_entry_points& e) { return e.cuLibraryUnload(state_->handle); };
    (void)detail::release_retried(*d, unload);
  }
  delete state_;
  state_ = nullptr;
}

}  // namespace cuasync
