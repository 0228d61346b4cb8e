// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// JIT (NVRTC through cuasync's caches) and checked launches.
#include "calls.hpp"
#include "objects.hpp"
#include "tracked_enqueue.hpp"
#include "typed_args.hpp"

#include <cuasync/driver/launch.hpp>
#include <cuasync/engine/work_key.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/kernel_package.hpp>
#include <cuasync/trace/flight_recorder.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace cuasync::c_api {

namespace {
// Compiles `p` for the runtime's device (memory cache, disk cache, then NVRTC) and loads it into its context.
std::shared_ptr<module_object> load_module(const std::shared_ptr<runtime_object>& r, const jit::program& p,
                                           const jit::compile_options& o) {
  const context_ref ctx = r->rt->context();
  jit::compile_result compiled = jit::default_compiler().compile(p, ctx.device().compute_capability(), o);
  auto m = std::make_shared<module_object>();
  m->owner = r;
  m->mod = module::load(ctx, compiled.program->bytes(), compiled.program->name);
  for (const auto& [expression, lowered] : compiled.program->lowered_names) m->mod.add_name_alias(expression, lowered);
  return m;
}
}  // namespace

cuasync_error* compile(cuasync_compile_args* a) noexcept {
  return call("compile", a, [](args<cuasync_compile_args>& x) {
    auto r = runtime_of(x->runtime, "runtime");
    program_request req = read_program("compile", x->name, x->source, x->options, x->num_options, x->headers,
                                       x->num_headers, x->name_expressions, x->num_name_expressions);
    x->module =
        to_handle<cuasync_module>(registry::instance().add(kind::module, load_module(r, req.program, req.options)));
  });
}

cuasync_error* package_load(cuasync_package_load_args* a) noexcept {
  return call("package_load", a, [](args<cuasync_package_load_args>& x) {
    if (!x->directory) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "package_load: directory is NULL");
    const jit::kernel_package k = jit::kernel_package::load(x->directory);  // a bad manifest is reported first
    auto r = runtime_of(x->runtime, "runtime");
    std::shared_ptr<module_object> m = load_module(r, k.program, k.options);
    const std::vector<std::string> entries = k.entry_points();
    for (const std::string& e : entries) (void)m->mod.kernel(e);  // each declared entry point exists
    x->num_entry_points = entries.size();
    x->module = to_handle<cuasync_module>(registry::instance().add(kind::module, std::move(m)));
  });
}

cuasync_error* module_destroy(cuasync_module_destroy_args* a) noexcept {
  return call("module_destroy", a, [](args<cuasync_module_destroy_args>& x) {
    auto m = registry::instance().take<module_object>(x->module, kind::module, "module");
    std::map<std::string, std::uintptr_t, std::less<>> kernels;
    {
      std::lock_guard lock(m->mutex);
      m->destroyed = true;  // a kernel_get holding the module from before makes no handle from now on
      kernels.swap(m->kernels);
    }
    // Its kernels turn stale with it; the module is unloaded once no call uses it any more.
    for (const auto& [name, k] : kernels) {
      try {
        registry::instance().take<kernel_object>(to_handle<void*>(k), kind::kernel, "kernel");
      } catch (const abi_error&) {
      }
    }
  });
}

cuasync_error* kernel_get(cuasync_kernel_get_args* a) noexcept {
  return call("kernel_get", a, [](args<cuasync_kernel_get_args>& x) {
    if (x->param_sizes_capacity && !x->param_sizes)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "kernel_get: param_sizes_capacity " +
                                               std::to_string(x->param_sizes_capacity) + " without param_sizes");
    if (x->param_types_capacity && !x->param_types)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "kernel_get: param_types_capacity " +
                                               std::to_string(x->param_types_capacity) + " without param_types");
    auto m = registry::instance().get<module_object>(x->module, kind::module, "module");
    if (!x->name) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "kernel_get: name is NULL");
    std::lock_guard lock(m->mutex);  // against module_destroy, and a second handle for one name
    if (m->destroyed) fail(CUASYNC_ERROR_STALE_HANDLE, "kernel_get: the module was destroyed");
    std::uintptr_t h = 0;
    std::shared_ptr<kernel_object> k;
    if (auto it = m->kernels.find(std::string_view(x->name)); it != m->kernels.end()) {
      h = it->second;
      k = registry::instance().get<kernel_object>(to_handle<void*>(h), kind::kernel, "kernel");
    } else {
      k = std::make_shared<kernel_object>();
      k->module = m;
      k->kernel = m->mod.kernel(x->name);
      describe_types(*k);
      auto slot = m->kernels.emplace(x->name, 0).first;  // room first: nothing can fail after the handle exists
      try {
        h = registry::instance().add(kind::kernel, k);
      } catch (...) {
        m->kernels.erase(slot);
        throw;
      }
      slot->second = h;
    }
    const auto& params = k->kernel.params();
    x->num_params = params.size();
    for (std::size_t i = 0; i < params.size() && i < x->param_sizes_capacity; ++i) x->param_sizes[i] = params[i].size;
    const bool typed = !k->arg_types.empty();
    for (std::size_t i = 0; i < params.size() && i < x->param_types_capacity; ++i)
      x->param_types[i] = typed ? k->arg_types[i] : CUASYNC_ARG_TYPE_NONE;
    x->param_type_names = typed ? k->type_names.data() : nullptr;
    x->typed = typed;
    x->kernel = to_handle<cuasync_kernel>(h);
  });
}

cuasync_error* launch(cuasync_launch_args* a) noexcept {
  return call("launch", a, [](args<cuasync_launch_args>& x) {
    // The flags first, like a struct field this library does not know: a caller's newer request is refused as such
    // whatever else is wrong.
    if (x->flags & ~std::uint32_t{CUASYNC_LAUNCH_UNTRACKED | CUASYNC_LAUNCH_DEPENDENT})
      fail(CUASYNC_ERROR_UNSUPPORTED, "launch: flags " + std::to_string(x->flags) + " has bits this library (ABI " +
                                          std::to_string(CUASYNC_ABI_MAJOR) + "." + std::to_string(CUASYNC_ABI_MINOR) +
                                          ") does not know (it knows CUASYNC_LAUNCH_UNTRACKED = 1 and "
                                          "CUASYNC_LAUNCH_DEPENDENT = 2)");
    const bool untracked = x->flags & CUASYNC_LAUNCH_UNTRACKED;
    if (untracked && (x->completion.queue || x->completion.callback))
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "launch: CUASYNC_LAUNCH_UNTRACKED with a completion (an untracked launch "
                                           "reports none: leave completion.queue and completion.callback NULL)");
    auto s = stream_of(x->stream, "stream");
    auto k = registry::instance().get<kernel_object>(x->kernel, kind::kernel, "kernel");
    if (x->num_args && !x->args) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "launch: num_args without args");
    delivery to = untracked ? delivery{} : make_delivery(x->completion, "launch");
    const auto& params = k->kernel.params();
    if (params.size() != x->num_args)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "launch: kernel '" + k->kernel.name() + "' takes " +
                                               std::to_string(params.size()) + " parameter(s) but " +
                                               std::to_string(x->num_args) + " were given");
    void* small[16];
    std::vector<void*> big;
    void** values = x->num_args <= 16 ? small : (big.resize(x->num_args), big.data());
    // ABI 1.4: typed arguments are compared with the kernel's precomputed codes (an extern "C" kernel has none: its
    // sizes alone are checked); a code that differs is looked at closely, and refused unless it fits.
    const std::uint32_t* types = k->arg_types.empty() ? nullptr : x->arg_types;
    for (std::size_t i = 0; i < x->num_args; ++i) {
      if (types && types[i] != k->arg_types[i] && types[i] != CUASYNC_ARG_TYPE_NONE) [[unlikely]]
        check_arg_type(*k, i, types[i]);
      if (x->args[i].size != params[i].size || !x->args[i].value)
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, "launch: kernel '" + k->kernel.name() + "' parameter " +
                                                 std::to_string(i) + " is " + std::to_string(params[i].size) +
                                                 " bytes but argument " + std::to_string(i) + " is " +
                                                 std::to_string(x->args[i].size) +
                                                 (x->args[i].value ? " bytes" : " bytes at NULL"));
      values[i] = const_cast<void*>(x->args[i].value);
    }
    auto dim = [](const std::uint32_t (&d)[3]) { return dims(d[0] ? d[0] : 1, d[1] ? d[1] : 1, d[2] ? d[2] : 1); };
    launch_config config;
    config.grid = dim(x->grid);
    config.block = dim(x->block);
    config.shared_memory_bytes = x->shared_memory_bytes;
    config.dependent_launch = (x->flags & CUASYNC_LAUNCH_DEPENDENT) != 0;  // set only for a kernel that waits
    // The configuration is checked before a place is taken (bad input costs none); the launch checks it again, cheaply.
    const detail::kernel_info& info = k->kernel.info();
    if (!detail::config_fits(info, config) || !(info.ctx == s->ref.context()))
      detail::check_config_slow(info, config, s->ref, std::source_location::current());
    // Checked: the launch goes to the driver (or the instrumentation's hooks) without launch_raw's checks again.
    void** launch_args = x->num_args ? values : nullptr;
    const std::source_location where = std::source_location::current();
    auto enqueue = [&] {
      if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]]
        detail::launch_instrumented(hooks, s->ref, info, config, launch_args, where);
      else
        detail::launch_unhooked(s->ref, info, config, launch_args, where);
    };
    // No place, no event, no completion: the caller orders the stream (or it is being captured).
    if (untracked) return enqueue();
    const std::uint64_t work_key = to ? launch_work_key(k->kernel.get(), config) : 0;  // predicted ends: reported work
    enqueue_tracked(*s, "launch", x->completion, std::move(to), work_key, enqueue);
  });
}

}  // namespace cuasync::c_api
