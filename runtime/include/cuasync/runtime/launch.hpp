// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `runtime::launch`: `cuasync::launch` with hazard tracking. Arguments wrapped in `reads(b)`, `writes(b)` or
//! `read_writes(b)` are passed to the kernel as the buffer's address, and the stream first waits for the conflicting
//! uses of each buffer on other streams.

#include <cuasync/driver/launch.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

namespace cuasync::runtime {

namespace detail {
template <class T>
const T& kernel_argument(const T& a) noexcept {
  return a;
}
inline CUdeviceptr kernel_argument(const buffer_access& b) noexcept { return b.buffer->get(); }

template <class T>
void declare_use(const T&, const located_stream&) noexcept {}
inline void declare_use(const buffer_access& b, const located_stream& s) { b.buffer->use(s.stream, b.mode, s.where); }
}  // namespace detail

template <class T>
concept tracked_access = requires { typename T::is_tracked_access; };

//! Enqueues `kernel<<<config>>>(args...)` on `s` after the cross-stream waits its tracked buffers need. At least one
//! argument is a `reads`/`writes`/`read_writes` wrapper (without one, `cuasync::launch` is the function).
//! @throws cuda_error as `cuasync::launch`
template <class... Args>
  requires(tracked_access<Args> || ...)
void launch(located_stream s, kernel_ref kernel, const launch_config& config, const Args&... args) {
  (detail::declare_use(args, s), ...);
  cuasync::launch(s, kernel, config, detail::kernel_argument(args)...);
}

}  // namespace cuasync::runtime
