// JIT (NVRTC through cuasync's caches) and checked launches.
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/launch.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/kernel_package.hpp>

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
    if (!x->source) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile: source is NULL");
    if ((x->num_options && !x->options) || (x->num_headers && !x->headers) ||
        (x->num_name_expressions && !x->name_expressions))
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile: a count without its array");
    jit::program p(x->name ? x->name : "program", x->source);
    for (std::size_t i = 0; i < x->num_headers; ++i) {
      if (!x->headers[i].name || !x->headers[i].contents)
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile: header " + std::to_string(i) + " has a NULL name or contents");
      p.add_header(x->headers[i].name, x->headers[i].contents);
    }
    for (std::size_t i = 0; i < x->num_name_expressions; ++i) {
      if (!x->name_expressions[i]) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile: a NULL name expression");
      p.add_name_expression(x->name_expressions[i]);
    }
    jit::compile_options o;
    for (std::size_t i = 0; i < x->num_options; ++i) {
      if (!x->options[i]) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "compile: a NULL option");
      o.extra.emplace_back(x->options[i]);
    }
    x->module = to_handle<cuasync_module>(registry::instance().add(kind::module, load_module(r, p, o)));
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
    x->kernel = to_handle<cuasync_kernel>(h);
  });
}

cuasync_error* launch(cuasync_launch_args* a) noexcept {
  return call("launch", a, [](args<cuasync_launch_args>& x) {
    // The flags first, like a struct field this library does not know: a caller's newer request is refused as such
    // whatever else is wrong.
    if (x->flags & ~std::uint32_t{CUASYNC_LAUNCH_UNTRACKED})
      fail(CUASYNC_ERROR_UNSUPPORTED, "launch: flags " + std::to_string(x->flags) + " has bits this library (ABI " +
                                          std::to_string(CUASYNC_ABI_MAJOR) + "." + std::to_string(CUASYNC_ABI_MINOR) +
                                          ") does not know (it knows CUASYNC_LAUNCH_UNTRACKED = 1)");
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
    for (std::size_t i = 0; i < x->num_args; ++i) {
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
    // The configuration is checked before a place is taken (bad input costs none); the launch checks it again, cheaply.
    const detail::kernel_info& info = k->kernel.info();
    if (!detail::config_fits(info, config) || !(info.ctx == s->ref.context()))
      detail::check_config_slow(info, config, s->ref, std::source_location::current());
    if (untracked) {  // no place, no event, no completion: the caller orders the stream (or it is being captured)
      launch_raw(s->ref, k->kernel, config, x->num_args ? values : nullptr);
      return;
    }
    refuse_if_captured(*s, "launch");
    admission_ticket ticket = admit(*s, "launch");
    launch_raw(s->ref, k->kernel, config, x->num_args ? values : nullptr);
    complete_after(s->ref, std::move(ticket), std::move(to));
  });
}

}  // namespace cuasync::c_api
