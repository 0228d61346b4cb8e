# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Kernels the GPU tests share."""
SOURCE = r"""
extern "C" __global__ void scale_add(const float* x, const float* y, float* out, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void fill_index(float* out, int i) { out[i] = (float)i; }
extern "C" __global__ void add_one(float* x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
// Spins for `ns` nanoseconds of GPU time (globaltimer), then writes `value`: a kernel of known length.
extern "C" __global__ void spin_then_write(float* out, float value, unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
  if (out) *out = value;
}
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
// Reads an illegal address: the context faults (used in a child process).
extern "C" __global__ void fault(float* p) { *(volatile float*)(p + (1ull << 40)) = 1.0f; }
"""
