// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The double buffer's kernel, compiled at run time by the double-buffer examples (runtime/ and raw versions).
namespace cuasync::examples {
inline constexpr const char* double_buffer_kernel_source = R"(
extern "C" __global__ void my_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i] + 1.0f;
})";
}  // namespace cuasync::examples
