// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/launch.hpp>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

const detail::kernel_info detail::empty_kernel_info{};

int kernel_ref::attribute(CUfunction_attribute attr, std::source_location where) const {
  if (!info_) detail::throw_empty_kernel("cuasync::kernel_ref::attribute", {}, where);
  int v = 0;
  if (CUresult r = driver().cuFuncGetAttribute(&v, attr, info_->function); r != CUDA_SUCCESS)
    throw_cu(r, "cuFuncGetAttribute", "attribute " + std::to_string(int(attr)) + " of kernel '" + info_->name + "'",
             where);
  return v;
}

void kernel_ref::set_max_dynamic_shared_memory(int bytes, std::source_location where) const {
  if (!info_) detail::throw_empty_kernel("cuasync::kernel_ref::set_max_dynamic_shared_memory", {}, where);
  const int limit = info_->device->max_shared_memory_per_block_optin - static_shared_memory_bytes(where);
  if (bytes < 0 || bytes > limit)
    detail::throw_invalid("cuasync::kernel_ref::set_max_dynamic_shared_memory",
                          "kernel '" + info_->name + "': " + std::to_string(bytes) +
                              " bytes of dynamic shared memory exceed the device's opt-in limit less static shared "
                              "memory (" + std::to_string(limit) + " bytes)",
                          where);
  if (CUresult r = driver().cuFuncSetAttribute(info_->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuFuncSetAttribute", "kernel '" + info_->name + "', " + std::to_string(bytes) + " bytes", where);
}

int kernel_ref::max_active_blocks_per_multiprocessor(int block_size, std::size_t dynamic_shared_bytes,
                                                     std::source_location where) const {
  if (!info_) detail::throw_empty_kernel("cuasync::kernel_ref::max_active_blocks_per_multiprocessor", {}, where);
  int n = 0;
  scoped_context guard(info_->ctx, where);
  if (CUresult r = driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, info_->function, block_size,
                                                                         dynamic_shared_bytes);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor", "kernel '" + info_->name + "'", where);
  return n;
}

namespace detail {
namespace {
std::string dims_text(dims d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}
std::string launch_text(const kernel_info& k, const launch_config& c, stream_ref s) {
  return "kernel '" + k.name + "', grid " + dims_text(c.grid) + ", block " + dims_text(c.block) + ", " +
         std::to_string(c.shared_memory_bytes) + " B shared, on " + s.describe();
}
}  // namespace

void throw_empty_kernel(const char* api, stream_ref s, std::source_location w) {
  throw cuda_error(make_error_code(CUDA_ERROR_INVALID_HANDLE), api,
                   "empty kernel_ref (default-constructed, or never set from module::kernel)" +
                       (s ? " on " + s.describe() : std::string()),
                   w);
}

void throw_argument_count(const kernel_info& k, std::size_t given, stream_ref s, std::source_location w) {
  throw_invalid("cuasync::launch",
                "kernel '" + k.name + "' takes " + std::to_string(k.params.size()) + " parameter(s) but " +
                    std::to_string(given) + " argument(s) were given (on " + s.describe() + ")",
                w);
}

void throw_argument_size(const kernel_info& k, std::size_t index, std::size_t given, stream_ref s,
                         std::source_location w) {
  throw_invalid("cuasync::launch",
                "kernel '" + k.name + "' parameter " + std::to_string(index) + " is " +
                    std::to_string(k.params[index].size) + " bytes but the argument given is " +
                    std::to_string(given) + " bytes (on " + s.describe() + ")",
                w);
}

void check_argument_type(const kernel_info& k, std::size_t index, type_code given, stream_ref s,
                         std::source_location w) {
  if (compatible(k.param_types[index], given)) return;
  throw_invalid("cuasync::launch",
                "kernel '" + k.name + "' parameter " + std::to_string(index) + " is " + k.param_type_names[index] +
                    " but the argument given is " + given.describe() + " (on " + s.describe() + ")",
                w);
}

void throw_bad_config(const kernel_info& k, const launch_config& c, stream_ref s, std::string what,
                      std::source_location w) {
  throw_invalid("cuasync::launch", std::move(what) + " [" + launch_text(k, c, s) + "]", w);
}

void throw_launch(CUresult r, const kernel_info& k, const launch_config& c, stream_ref s, std::source_location w) {
  throw_cu(r, "cuLaunchKernelEx", launch_text(k, c, s), w);
}

void launch_in_context(const CUlaunchConfig& cfg, stream_ref s, const kernel_info& k, const launch_config& c,
                       void** params, std::source_location where) {
  scoped_context guard(k.ctx.get(), where);
  if (CUresult r = driver().cuLaunchKernelEx(&cfg, k.function, params, nullptr); r != CUDA_SUCCESS)
    throw_launch(r, k, c, s, where);
}

void launch_refused(CUresult r, const CUlaunchConfig& cfg, stream_ref s, const kernel_info& k, const launch_config& c,
                    void** params, std::source_location where) {
  CUcontext current = nullptr;
  if (r == CUDA_ERROR_INVALID_CONTEXT && driver().cuCtxGetCurrent(&current) == CUDA_SUCCESS && !current)
    return launch_in_context(cfg, s, k, c, params, where);
  throw_launch(r, k, c, s, where);
}

void check_config_slow(const kernel_info& k, const launch_config& c, stream_ref s, std::source_location w) {
  if (!s) throw_bad_config(k, c, s, "empty stream", w);
  if (!(k.ctx == s.context()))
    throw_bad_config(k, c, s,
                     "the kernel's module is loaded in another context (device " +
                         std::to_string(k.ctx.device_ordinal()) + ") than the stream's",
                     w);
  check_config_limits(k, c, s, w);
}

void check_config_limits(const kernel_info& k, const launch_config& c, stream_ref s, std::source_location w) {
  const device_properties& d = *k.device;
  const unsigned b[3] = {c.block.x, c.block.y, c.block.z}, g[3] = {c.grid.x, c.grid.y, c.grid.z};
  const char* axis = "xyz";
  for (int i = 0; i < 3; ++i) {
    if (b[i] == 0 || b[i] > unsigned(d.max_block_dim[i]))
      throw_bad_config(k, c, s,
                       std::string("block.") + axis[i] + " = " + std::to_string(b[i]) + " is outside 1.." +
                           std::to_string(d.max_block_dim[i]),
                       w);
    if (g[i] == 0 || g[i] > unsigned(d.max_grid_dim[i]))
      throw_bad_config(k, c, s,
                       std::string("grid.") + axis[i] + " = " + std::to_string(g[i]) + " is outside 1.." +
                           std::to_string(d.max_grid_dim[i]),
                       w);
  }
  if (c.block.volume() > unsigned(k.max_threads_per_block))
    throw_bad_config(k, c, s,
                     std::to_string(c.block.volume()) + " threads per block exceed this kernel's limit of " +
                         std::to_string(k.max_threads_per_block),
                     w);
  if (c.shared_memory_bytes > unsigned(d.max_shared_memory_per_block_optin))
    throw_bad_config(k, c, s,
                     std::to_string(c.shared_memory_bytes) + " bytes of dynamic shared memory exceed the device's "
                     "limit of " + std::to_string(d.max_shared_memory_per_block_optin),
                     w);
}
}  // namespace detail

}  // namespace cuasync
