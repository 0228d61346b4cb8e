// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.0f;
}
