// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's entry points for modules, functions and launches.
#include "entry_support.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>
#include <mutex>

namespace sim::api {
// The attributes of the last cuLaunchKernelEx (fake_cuda_last_launch_attributes): what cuasync asked the driver for.
std::mutex attributes_mutex;
std::vector<int> last_attributes;

namespace {

// ---- modules and launches ----

CUresult CUDAAPI ModuleLoadDataEx(CUmodule* out, const void* image, unsigned n, CUjit_option* options, void** values) {
  ENTER(cuModuleLoadDataEx, CUDA_ERROR_INVALID_PTX);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  for (unsigned i = 0; i < n; ++i)  // empty logs
    if ((options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER) && values[i])
      *static_cast<char*>(values[i]) = 0;
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (bytes[0] == 0x7f || bytes[0] == 0x50)  // ELF or fatbin: no machine code runs here
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  auto m = std::make_unique<module_state>();
  m->ctx = c;
  if (!parse_ptx(static_cast<const char*>(image), *m)) return CUDA_ERROR_INVALID_PTX;
  return adopt(d, d.modules, kind::module, std::move(m), out);
}
CUresult CUDAAPI ModuleUnload(CUmodule m) {
  ENTER_DESTROY(cuModuleUnload, kind::module);
  lock_t lock(d.m);
  return forget(d, d.modules, kind::module, m);
}
CUresult CUDAAPI ModuleGetFunction(CUfunction* out, CUmodule hm, const char* name) {
  ENTER(cuModuleGetFunction, unknown);
  lock_t lock(d.m);
  auto it = d.modules.find(hm);
  if (it == d.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto f = it->second->functions.find(name);
  if (f == it->second->functions.end()) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUfunction>(f->second.get());
  return CUDA_SUCCESS;
}
// ---- context-independent libraries ----

CUresult CUDAAPI LibraryLoadData(CUlibrary* out, const void* code, CUjit_option*, void**, unsigned, CUlibraryOption*,
                                 void**, unsigned) {
  ENTER(cuLibraryLoadData, CUDA_ERROR_INVALID_PTX);
  if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  const auto* bytes = static_cast<const unsigned char*>(code);
  if (bytes[0] == 0x7f || bytes[0] == 0x50) return CUDA_ERROR_NO_BINARY_FOR_GPU;  // no machine code runs here
  auto l = std::make_unique<library_state>();
  l->ptx = static_cast<const char*>(code);
  module_state probe;
  if (!parse_ptx(l->ptx.c_str(), probe)) return CUDA_ERROR_INVALID_PTX;
  return adopt(d, d.libraries, kind::library, std::move(l), out);
}
CUresult CUDAAPI LibraryUnload(CUlibrary l) {
  ENTER_DESTROY(cuLibraryUnload, kind::library);
  lock_t lock(d.m);
  return forget(d, d.libraries, kind::library, l);
}
CUresult CUDAAPI LibraryGetKernel(CUkernel* out, CUlibrary hl, const char* name) {
  ENTER(cuLibraryGetKernel, unknown);
  lock_t lock(d.m);
  auto it = d.libraries.find(hl);
  if (it == d.libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
  library_state& l = *it->second;
  module_state probe;
  parse_ptx(l.ptx.c_str(), probe);
  if (!probe.functions.count(name)) return CUDA_ERROR_NOT_FOUND;
  auto& k = l.kernels[name];
  if (!k) k = std::make_unique<kernel_state>(kernel_state{&l, name});
  *out = reinterpret_cast<CUkernel>(k.get());
  return CUDA_SUCCESS;
}
// The library of a kernel handle still loaded (nullptr otherwise). Lock held.
library_state* library_of(device_model& d, CUkernel k) {
  for (auto& [h, l] : d.libraries)
    for (auto& [name, ks] : l->kernels)
      if (reinterpret_cast<CUkernel>(ks.get()) == k) return l.get();
  return nullptr;
}
CUresult CUDAAPI KernelGetFunction(CUfunction* out, CUkernel hk) {
  ENTER(cuKernelGetFunction, unknown);
  lock_t lock(d.m);
  library_state* l = library_of(d, hk);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  auto& m = l->per_context[c];
  if (!m) {
    m = std::make_unique<module_state>();
    m->ctx = c;
    parse_ptx(l->ptx.c_str(), *m);
  }
  *out = reinterpret_cast<CUfunction>(m->functions.at(reinterpret_cast<kernel_state*>(hk)->name).get());
  return CUDA_SUCCESS;
}

}  // namespace

function_state* find_function(device_model& d, CUfunction f) {
  auto* fs = reinterpret_cast<function_state*>(f);
  for (auto& [h, m] : d.modules)
    for (auto& [name, fn] : m->functions)
      if (fn.get() == fs) return fs;
  for (auto& [h, l] : d.libraries)
    for (auto& [c, m] : l->per_context)
      for (auto& [name, fn] : m->functions)
        if (fn.get() == fs) return fs;
  return nullptr;
}

bool pack_arguments(const function_state& f, void** params, void** extra, std::vector<unsigned char>& args) {
  args.clear();
  if (params) {
    for (std::size_t i = 0; i < f.params.size(); ++i) {
      args.resize(f.params[i].offset + f.params[i].size);
      std::memcpy(args.data() + f.params[i].offset, params[i], f.params[i].size);
    }
  } else if (extra) {
    void* buffer = nullptr;
    std::size_t size = 0;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(e[1]);
    }
    if (!buffer) return false;
    args.assign(static_cast<unsigned char*>(buffer), static_cast<unsigned char*>(buffer) + size);
  } else if (!f.params.empty()) {
    return false;
  }
  return true;
}

CUresult check_launch_shape(const function_state& f, const unsigned grid[3], const unsigned block[3],
                            unsigned shared) {
  if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2]) return CUDA_ERROR_INVALID_VALUE;
  if (std::uint64_t(block[0]) * block[1] * block[2] > 1024 || block[2] > 64) return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(std::max(48 << 10, f.max_dynamic_shared))) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

std::function<void()> kernel_work(device_model& d, context_state* c, const function_state& f,
                                  std::vector<unsigned char> args) {
  // A copy of `f`: the module may be unloaded before the work runs (the driver keeps it).
  return [&d, c, fn = f, args = std::move(args)] {
    if (CUresult e = run_kernel(fn, args)) {
      std::lock_guard l(d.m);
      if (c->sticky == CUDA_SUCCESS) c->sticky = e;
    }
  };
}

namespace {

CUresult CUDAAPI FuncGetAttribute(int* v, CUfunction_attribute a, CUfunction hf) {
  ENTER(cuFuncGetAttribute, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 16; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dynamic_shared; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI FuncSetAttribute(CUfunction hf, CUfunction_attribute a, int v) {
  ENTER(cuFuncSetAttribute, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_SUCCESS;
  if (v < 0 || v > (227 << 10)) return CUDA_ERROR_INVALID_VALUE;
  f->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI FuncGetParamInfo(CUfunction hf, size_t i, size_t* offset, size_t* size) {
  ENTER(cuFuncGetParamInfo, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (i >= f->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->params[i].offset;
  if (size) *size = f->params[i].size;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction hf, int block, size_t) {
  ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor, unknown);
  lock_t lock(d.m);
  if (!find_function(d, hf)) return CUDA_ERROR_INVALID_HANDLE;
  if (block <= 0 || block > 1024) return CUDA_ERROR_INVALID_VALUE;
  *n = std::min(32, 2048 / block);
  return CUDA_SUCCESS;
}
std::atomic<bool> launch_needs_current{false};  // fake_cuda_launch_needs_current_context

CUresult launch(device_model& d, CUfunction hf, const unsigned grid[3], const unsigned block[3], unsigned shared,
                CUstream hs, void** params, void** extra) {
  if (launch_needs_current.load() && !current_context()) return CUDA_ERROR_INVALID_CONTEXT;
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  context_state* c = context_of(s);
  if (CUresult u = usable(c)) return u;
  if (c != f->module->ctx) return CUDA_ERROR_INVALID_HANDLE;  // a function of another context
  if (CUresult shape = check_launch_shape(*f, grid, block, shared)) return shape;
  std::vector<unsigned char> args;
  if (!pack_arguments(*f, params, extra, args)) return CUDA_ERROR_INVALID_VALUE;
  std::function<bool()> gate = kernel_gate(*f, args);
  node_params kept;
  if (s && s->capture)  // a node: what the node-update calls read and change (entry_graph_update.cpp)
    kept.kernel = std::make_shared<const kernel_node_params>(
        kernel_node_params{hf, std::make_shared<const function_state>(*f), args, {grid[0], grid[1], grid[2]},
                           {block[0], block[1], block[2]}, shared});
  submit(d, s, kernel_work(d, c, *f, std::move(args)), 0, std::move(gate), CU_GRAPH_NODE_TYPE_KERNEL,
         std::move(kept));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI LaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  ENTER(cuLaunchKernel, no_resources);
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(d, f, grid, block, shared, s, params, extra);
}
CUresult CUDAAPI LaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  ENTER(cuLaunchKernelEx, no_resources);
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(attributes_mutex);
    last_attributes.clear();
    for (unsigned i = 0; i < config->numAttrs; ++i) {
      const CUlaunchAttribute& a = config->attrs[i];
      // A programmatic serialization that is not 1 is a request the driver would take as "off": record what counts.
      const bool off = a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
                       !a.value.programmaticStreamSerializationAllowed;
      if (!off) last_attributes.push_back(static_cast<int>(a.id));
    }
  }
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return launch(d, f, grid, block, config->sharedMemBytes, config->hStream, params, extra);
}

}  // namespace

std::span<const entry> module_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuModuleLoadDataEx, ModuleLoadDataEx),
      CUASYNC_SIM_ENTRY(cuModuleUnload, ModuleUnload),
      CUASYNC_SIM_ENTRY(cuModuleGetFunction, ModuleGetFunction),
      CUASYNC_SIM_ENTRY(cuLibraryLoadData, LibraryLoadData),
      CUASYNC_SIM_ENTRY(cuLibraryUnload, LibraryUnload),
      CUASYNC_SIM_ENTRY(cuLibraryGetKernel, LibraryGetKernel),
      CUASYNC_SIM_ENTRY(cuKernelGetFunction, KernelGetFunction),
      CUASYNC_SIM_ENTRY(cuFuncGetAttribute, FuncGetAttribute),
      CUASYNC_SIM_ENTRY(cuFuncSetAttribute, FuncSetAttribute),
      CUASYNC_SIM_ENTRY(cuFuncGetParamInfo, FuncGetParamInfo),
      CUASYNC_SIM_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor, OccupancyMaxActiveBlocksPerMultiprocessor),
      CUASYNC_SIM_ENTRY(cuLaunchKernelEx, LaunchKernelEx),
      CUASYNC_SIM_ENTRY(cuLaunchKernel, LaunchKernel),
  };
  return table;
}

}  // namespace sim::api

extern "C" int fake_cuda_last_launch_attributes(int* ids, int max) {
  std::lock_guard lock(sim::api::attributes_mutex);
  const auto& a = sim::api::last_attributes;
  for (int i = 0; i < max && i < static_cast<int>(a.size()); ++i) ids[i] = a[i];
  return static_cast<int>(a.size());
}

extern "C" void fake_cuda_launch_needs_current_context(int on) { sim::api::launch_needs_current.store(on != 0); }
