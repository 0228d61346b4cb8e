// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Kernel launches through `cuLaunchKernelEx`. `launch(stream, kernel, config, args...)` checks, before
//! anything is enqueued, the argument count and every argument's size against the kernel's parameters
//! (`cuFuncGetParamInfo`, read once per kernel) and the configuration against the device's limits. All checks are
//! compares against cached values: no extra driver call on the hot path.

#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/hooks.hpp>

#include <array>
#include <optional>
#include <type_traits>

namespace cuasync {

//! Grid, block or cluster dimensions.
struct dims {
  unsigned x = 1, y = 1, z = 1;
  constexpr dims() = default;
  constexpr dims(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
  constexpr unsigned long long volume() const noexcept { return 1ull * x * y * z; }
};

//! How to launch a kernel.
struct launch_config {
  dims grid;
  dims block;
  unsigned shared_memory_bytes = 0;  //!< dynamic shared memory per block
  std::optional<dims> cluster;       //!< thread block cluster dimensions (compute capability ≥ 9.0)
  bool cooperative = false;          //!< grid-wide synchronisation (all blocks resident)
  std::optional<int> priority;       //!< per-launch priority, overriding the stream's
  //! Programmatic dependent launch (PDL, compute capability 9.0+): the kernel may start while the previous kernel on
  //! the stream still runs (once that one triggers, `griddepcontrol.launch_dependents`, or ends), hiding the launch
  //! gap of a chain of short kernels. Safe only for a kernel that waits for its predecessor's results
  //! (`griddepcontrol.wait` / `cudaGridDependencySynchronize()`) before reading them, so cuasync sets the driver's
  //! programmatic-stream-serialization attribute only when the kernel's image holds that wait
  //! (`kernel_ref::waits_on_grid_dependency()`); any other kernel is launched in plain stream order.
  bool dependent_launch = false;
};

namespace detail {
//! Throws `cuda_error(CUDA_ERROR_INVALID_HANDLE)` for an empty `kernel_ref` given to `api` (on `s`, which may be
//! empty).
[[noreturn]] void throw_empty_kernel(const char* api, stream_ref s, std::source_location w);
//! The kernel's layout, refusing an empty kernel_ref (one compare) before anything is enqueued. @throws cuda_error
inline const kernel_info& launched_kernel(kernel_ref k, const char* api, stream_ref s, std::source_location w) {
  if (!k) [[unlikely]] throw_empty_kernel(api, s, w);
  return k.info();
}
[[noreturn]] void throw_argument_count(const kernel_info& k, std::size_t given, stream_ref s, std::source_location w);
[[noreturn]] void throw_argument_size(const kernel_info& k, std::size_t index, std::size_t given, stream_ref s,
                                      std::source_location w);
//! Throws unless an argument of type `given` may be passed for parameter `index` of `k` (`compatible`): reached only
//! when the codes differ.
void check_argument_type(const kernel_info& k, std::size_t index, type_code given, stream_ref s,
                         std::source_location w);
[[noreturn]] void throw_bad_config(const kernel_info& k, const launch_config& c, stream_ref s, std::string what,
                                   std::source_location w);
[[noreturn]] void throw_launch(CUresult r, const kernel_info& k, const launch_config& c, stream_ref s,
                               std::source_location w);
void check_config_slow(const kernel_info& k, const launch_config& c, stream_ref s, std::source_location w);
//! The device's and kernel's limits alone (`s`, which may be empty, only names the stream in the message): for a
//! configuration that is not launched on a stream now (a graph's kernel node). @throws cuda_error
void check_config_limits(const kernel_info& k, const launch_config& c, stream_ref s, std::source_location w);

//! True when the whole configuration is surely within the kernel's and device's limits (the common case);
//! otherwise `check_config_slow` finds out which limit is broken and throws.
inline bool config_fits(const kernel_info& k, const launch_config& c) noexcept {
  const device_properties& d = *k.device;
  return c.block.x - 1u < unsigned(d.max_block_dim[0]) && c.block.y - 1u < unsigned(d.max_block_dim[1]) &&
         c.block.z - 1u < unsigned(d.max_block_dim[2]) && c.grid.x - 1u < unsigned(d.max_grid_dim[0]) &&
         c.grid.y - 1u < unsigned(d.max_grid_dim[1]) && c.grid.z - 1u < unsigned(d.max_grid_dim[2]) &&
         c.block.volume() <= unsigned(k.max_threads_per_block) &&
         c.shared_memory_bytes <= unsigned(d.max_shared_memory_per_block_optin);
}

//! The launch with `k`'s context current on this thread (pushed when it is not, popped after). Throws as the launch.
void launch_in_context(const CUlaunchConfig& cfg, stream_ref s, const kernel_info& k, const launch_config& c,
                       void** params, std::source_location where);
//! A launch on a stream of its own refused with `r`: tried again with `k`'s context current when the refusal was for
//! having none current (CUDA_ERROR_INVALID_CONTEXT on a thread without one); otherwise (or failing again) throws.
void launch_refused(CUresult r, const CUlaunchConfig& cfg, stream_ref s, const kernel_info& k, const launch_config& c,
                    void** params, std::source_location where);
//! The launch itself, checks done, uninstrumented.
inline void launch_unhooked(stream_ref s, const kernel_info& k, const launch_config& c, void** params,
                            std::source_location where) {
  CUlaunchAttribute attrs[4];
  unsigned n = 0;
  if (c.dependent_launch && k.waits_on_grid_dependency) [[unlikely]] {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (c.cooperative) [[unlikely]] {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n++].value.cooperative = 1;
  }
  if (c.cluster) [[unlikely]] {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = c.cluster->x;
    attrs[n].value.clusterDim.y = c.cluster->y;
    attrs[n++].value.clusterDim.z = c.cluster->z;
  }
  if (c.priority) [[unlikely]] {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[n++].value.priority = *c.priority;
  }
  CUlaunchConfig cfg{c.grid.x,  c.grid.y,  c.grid.z, c.block.x, c.block.y, c.block.z, c.shared_memory_bytes,
                     s.get(),   attrs,     n};
  // A stream of its own names the context (the driver launches in the stream's, which must be the function's): no
  // current context needed, so none is pushed and popped around each launch on a thread without one (an io thread
  // that never made one current paid two driver calls per launch). The default streams name none: the function's
  // context is made current for them, and for a driver that refuses a launch from a thread with no current context.
  const CUstream h = s.get();
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) [[unlikely]]
    return launch_in_context(cfg, s, k, c, params, where);
  if (CUresult r = driver().cuLaunchKernelEx(&cfg, k.function, params, nullptr); r != CUDA_SUCCESS) [[unlikely]]
    launch_refused(r, cfg, s, k, c, params, where);
}

//! The launch between the instrumentation's hooks (trace, NVTX, watchdog): out of line, reached only when one is on.
void launch_instrumented(std::uint32_t hooks, stream_ref s, const kernel_info& k, const launch_config& c,
                         void** params, std::source_location where);
//! The launch with only the flight recorder on (driver/src/flight_hooks.cpp): recorded, enqueued, its outcome marked.
void launch_flown(stream_ref s, const kernel_info& k, const launch_config& c, void** params,
                  std::source_location where);

inline void launch_prepared(stream_ref s, const kernel_info& k, const launch_config& c, void** params,
                            std::source_location where) {
  if (!config_fits(k, c) || !(k.ctx == s.context()) || !s) [[unlikely]] check_config_slow(k, c, s, where);
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]] {
    if (hooks == trace::hook::flight)  // the flight recorder alone, on in production: straight to its own path
      launch_flown(s, k, c, params, where);
    else
      launch_instrumented(hooks, s, k, c, params, where);
  } else {
    launch_unhooked(s, k, c, params, where);
  }
}
}  // namespace detail

namespace detail {
//! Checks the argument count and sizes of a launch of `k` with arguments of types `Args`, and their types where the
//! kernel's are known (compares only).
template <class... Args>
void check_arguments(const kernel_info& k, stream_ref s, std::source_location where) {
  if (k.params.size() != sizeof...(Args)) [[unlikely]]
    throw_argument_count(k, sizeof...(Args), s, where);
  if constexpr (sizeof...(Args) > 0) {
    constexpr std::array<std::size_t, sizeof...(Args)> sizes{sizeof(Args)...};
    for (std::size_t i = 0; i < sizes.size(); ++i)
      if (k.params[i].size != sizes[i]) [[unlikely]] throw_argument_size(k, i, sizes[i], s, where);
    if (!k.param_types.empty()) {  // a C++ kernel: its types are known, one compare per argument
      constexpr std::array<type_code, sizeof...(Args)> types{type_code_of<Args>()...};
      for (std::size_t i = 0; i < types.size(); ++i)
        if (k.param_types[i] != types[i]) [[unlikely]] check_argument_type(k, i, types[i], s, where);
    }
  }
}
//! Everything `launch` checks before enqueuing, without enqueuing: for launches enqueued later (async_io's
//! admission), so that bad input still throws from the call. @throws cuda_error
template <class... Args>
void check_launch(const kernel_info& k, const launch_config& c, stream_ref s, std::source_location where) {
  check_arguments<Args...>(k, s, where);
  if (!config_fits(k, c) || !(k.ctx == s.context()) || !s) [[unlikely]] check_config_slow(k, c, s, where);
}
}  // namespace detail

//! What `launch` passes to a kernel: a trivially copyable value. Types that declare `using is_tracked_access = void`
//! (runtime/'s `reads(b)`, `writes(b)`) are left to `runtime::launch`, so the two overloads never compete.
template <class T>
concept kernel_argument = std::is_trivially_copyable_v<T> && !requires { typename T::is_tracked_access; };

//! Enqueues `kernel<<<config>>>(args...)` on `s`. Each argument is passed by value, byte for byte: its type's size
//! must equal the kernel parameter's (pass `int` for `int`, a pointer or `CUdeviceptr` for a pointer). For a C++
//! kernel (a mangled name: a name expression, or the symbol itself) each argument's type must also fit the
//! parameter's (`compatible` in kernel_signature.hpp): a `double*` for a `float*`, or an `int` for a `float`, is
//! refused.
//! @throws cuda_error before enqueuing when the count, a size or a type does not match (naming the kernel, the
//! parameter index and both sizes or types), when the configuration exceeds a limit, when the stream and kernel belong to different
//! contexts or either is empty; and with the driver's error if the launch itself fails.
template <kernel_argument... Args>
void launch(located_stream ls, kernel_ref kernel, const launch_config& config, const Args&... args) {
  const stream_ref s = ls.stream;
  const std::source_location where = ls.where;
  const detail::kernel_info& k = detail::launched_kernel(kernel, "cuasync::launch", s, where);
  detail::check_arguments<Args...>(k, s, where);
  if constexpr (sizeof...(Args) > 0) {
    void* params[] = {const_cast<void*>(static_cast<const void*>(&args))...};
    detail::launch_prepared(s, k, config, params, where);
  } else {
    detail::launch_prepared(s, k, config, nullptr, where);
  }
}

//! Enqueues a launch with pre-built parameter pointers (`params[i]` points at argument i; the caller vouches for
//! their sizes). For generated code and the C ABI. @throws cuda_error (as `launch`)
inline void launch_raw(stream_ref s, kernel_ref kernel, const launch_config& config, void** params,
                       std::source_location where = std::source_location::current()) {
  detail::launch_prepared(s, detail::launched_kernel(kernel, "cuasync::launch_raw", s, where), config, params, where);
}

}  // namespace cuasync
