// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Running a `fill(u32* p, u32 n, u32 value)` kernel (the simulated driver's sim_fill_u32, or one compiled for a GPU)
// over 64 elements and reading them back: how the runtime tests see that a kernel they got is launchable.
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>

#include <span>
#include <vector>

namespace cuasync::test {

inline std::vector<unsigned> fill_and_read(context_ref ctx, kernel_ref k, unsigned value) {
  stream s = stream::create(ctx);
  device_buffer out = device_buffer::allocate(ctx, 64 * sizeof(unsigned));
  launch(s, k, launch_config{.grid = 1, .block = 64}, out.data<unsigned>(), 64u, value);
  std::vector<unsigned> host(64);
  copy_async(s, std::span<std::byte>(reinterpret_cast<std::byte*>(host.data()), 64 * sizeof(unsigned)), out.span());
  s.synchronize();
  return host;
}

}  // namespace cuasync::test
