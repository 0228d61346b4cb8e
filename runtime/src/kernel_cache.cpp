// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/kernel_cache.hpp>

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/target.hpp>

namespace cuasync::runtime {

namespace {
constexpr const char* api = "cuasync::runtime::kernel_cache";

void check_request(context_ref ctx, jit::output_request request, std::source_location where) {
  if (request == jit::output_request::ltoir)
    cuasync::detail::throw_invalid(
        api, "LTO-IR cannot be loaded as a module: link it with nvJitLink, or ask for CUBIN or PTX", where);
  if (!ctx) cuasync::detail::throw_invalid(api, "empty context", where);
}
}  // namespace

jit::target kernel_cache::target_for(context_ref ctx, jit::output_request request, std::source_location where) const {
  check_request(ctx, request, where);
  // The compiler's NVRTC identity: a disk hit in a fresh process then needs no NVRTC (see jit/nvrtc_identity.hpp).
  return compiler_->target_for(ctx.device(where).compute_capability(where), request, where);
}

const kernel_cache::loaded& kernel_cache::load(context_ref ctx, const jit::program& p, const jit::compile_options& o,
                                               jit::output_request request, std::source_location where) {
  check_request(ctx, request, where);
  // The compiler's own memory cache makes this cheap on a hit (one hash, one lookup); a miss compiles here, outside
  // this cache's lock, so compiles of different programs run in parallel. By compute capability, so that the
  // compiler chooses the target again should the loaded NVRTC differ from the identity it had recorded.
  jit::compile_result compiled = compiler_->compile(p, ctx.device(where).compute_capability(where), o, request, where);
  // By the context's id, not its handle: a context destroyed and another created may share the handle, and the old
  // one's modules are dead there.
  const unsigned long long id = ctx.id(where);
  const auto map_key = std::make_pair(id, std::make_pair(compiled.key.low, compiled.key.high));
  std::lock_guard lock(mutex_);
  if (auto it = modules_.find(map_key); it != modules_.end()) {
    ++module_hits_;
    return *it->second;
  }
  if (auto [it, added] = id_of_handle_.try_emplace(ctx.get(), id); !added && it->second != id) {
    // The handle's previous context is gone: its modules went with it. Their entries are dropped without unloading
    // (the handles may be another module's now).
    for (auto e = modules_.begin(); e != modules_.end();)
      if (e->first.first == it->second) {
        e->second->module.abandon();
        e = modules_.erase(e);
      } else {
        ++e;
      }
    it->second = id;
  }
  const jit::compiled_program& prog = *compiled.program;
  if (prog.target.kind == jit::output_kind::ptx)
    jit::check_ptx_loadable(prog.text(), cuasync::detail::driver().driver_version, prog.name, where);
  auto entry = std::make_unique<loaded>();
  entry->program = compiled.program;
  entry->module = cuasync::module::load(ctx, prog.bytes(), prog.name + " (" + prog.target.to_string() + ")", where);
  entry->context = ctx.get();
  for (const auto& [expression, lowered] : prog.lowered_names) entry->module.add_name_alias(expression, lowered);
  ++module_loads_;
  return *modules_.emplace(map_key, std::move(entry)).first->second;
}

const cuasync::library& kernel_cache::load_library(const jit::compile_result& compiled, std::source_location where) {
  const auto key = std::make_pair(compiled.key.low, compiled.key.high);
  {
    std::lock_guard lock(mutex_);
    if (auto it = libraries_.find(key); it != libraries_.end()) {
      ++library_hits_;
      return *it->second;
    }
  }
  // Loaded unlocked: a PTX the driver JIT-compiles takes up to ~100 ms, and a warm start loads many while the
  // caller's threads look kernels up here.
  const jit::compiled_program& prog = *compiled.program;
  if (prog.target.kind == jit::output_kind::ltoir)
    cuasync::detail::throw_invalid(api, "LTO-IR cannot be loaded as a library: link it with nvJitLink", where);
  if (prog.target.kind == jit::output_kind::ptx)
    jit::check_ptx_loadable(prog.text(), cuasync::detail::driver().driver_version, prog.name, where);
  auto lib = std::make_unique<cuasync::library>(
      cuasync::library::load(prog.bytes(), prog.name + " (" + prog.target.to_string() + ")", where));
  for (const auto& [expression, lowered] : prog.lowered_names) lib->add_name_alias(expression, lowered);
  std::lock_guard lock(mutex_);
  auto [it, added] = libraries_.try_emplace(key, std::move(lib));
  if (added) ++library_loads_;
  else ++library_hits_;  // another thread loaded it meanwhile: keep that one (ours is unloaded)
  return *it->second;
}

kernel_ref kernel_cache::shared_kernel(context_ref ctx, const jit::program& p, std::string_view name,
                                       const jit::compile_options& o, jit::output_request request,
                                       std::source_location where) {
  check_request(ctx, request, where);
  const jit::compile_result compiled =
      compiler_->compile(p, ctx.device(where).compute_capability(where), o, request, where);
  return load_library(compiled, where).kernel(ctx, name, where);
}

kernel_ref kernel_cache::linked_kernel(context_ref ctx, std::span<const jit::program> programs, std::string_view name,
                                       const jit::compile_options& o, const jit::link_options& lo,
                                       std::source_location where) {
  check_request(ctx, jit::output_request::automatic, where);
  const jit::compile_result linked =
      compiler_->link_programs(programs, ctx.device(where).compute_capability(where), o, lo, {}, where);
  return load_library(linked, where).kernel(ctx, name, where);
}

module_ref kernel_cache::module(context_ref ctx, const jit::program& p, const jit::compile_options& o,
                                jit::output_request request, std::source_location where) {
  return load(ctx, p, o, request, where).module;
}

std::shared_ptr<const jit::compiled_program> kernel_cache::compiled(context_ref ctx, const jit::program& p,
                                                                    const jit::compile_options& o,
                                                                    jit::output_request request,
                                                                    std::source_location where) {
  return load(ctx, p, o, request, where).program;
}

kernel_cache::~kernel_cache() {
  const auto* d = cuasync::detail::driver_if_loaded();
  for (auto& [key, entry] : modules_) {
    unsigned long long now = 0;
    // Its context gone (destroyed, or its handle another context's now): unloading would touch a dead context.
    if (!d || d->cuCtxGetId(entry->context, &now) != CUDA_SUCCESS || now != key.first) entry->module.abandon();
  }
}

kernel_cache_stats kernel_cache::stats() const noexcept {
  std::lock_guard lock(mutex_);
  return {module_hits_, module_loads_, library_hits_, library_loads_};
}

}  // namespace cuasync::runtime
