// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The inference pipeline's "infer_kernel", compiled at run time by the examples (runtime/ and async_io/ versions of the
// service share it): 64 steps of x*0.5+1 per feature, which converge towards 2, so every score is checkable.
namespace cuasync::examples {
inline constexpr const char* infer_kernel_source = R"(
extern "C" __global__ void infer_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = in[i];
    for (int k = 0; k < 64; ++k) x = x * 0.5f + 1.0f;  // converges towards 2
    out[i] = x;
  }
})";
}  // namespace cuasync::examples
