// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernels for the tests and benchmarks, built by nvcc as CUBIN, PTX and fatbin (tests/CMakeLists.txt).
#include <assert.h>
#include <cstdint>

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void fill_iota(int* out, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = base + i;
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// The same as a C++ kernel: its mangled name (_Z11typed_saxpyIfEvT_PKS0_PS0_i) carries its parameter types, which
// launches then check (tests/driver/module_launch_test.cpp; bench/driver measures what the check costs).
template <typename T>
__global__ void typed_saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
template __global__ void typed_saxpy<float>(float, const float*, float*, int);

extern "C" __global__ void add_value(int* data, int n, int value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += value;
}

// out[i] = in[i] * 2 + 1, for ordering tests across streams.
extern "C" __global__ void twice_plus_one(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2 + 1;
}

// The gate: spins until the host writes a non-zero value into *flag (pinned, mapped memory).
extern "C" __global__ void spin_until_flag(volatile int* flag) {
  while (*flag == 0) {
    __nanosleep(1000);
  }
}

// Busy-waits for `ns` nanoseconds of GPU time (for latency benchmarks: "a 20 µs kernel").
extern "C" __global__ void sleep_ns(unsigned long long ns) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

// Writes through a pointer the caller makes invalid: the context faults with CUDA_ERROR_ILLEGAL_ADDRESS.
extern "C" __global__ void write_to(int* p, int value) { *p = value; }

// A checksum of n bytes (for copy round trips): sum of byte * (index % 251 + 1), 64-bit.
extern "C" __global__ void byte_checksum(const unsigned char* data, unsigned long long n,
                                         unsigned long long* result) {
  unsigned long long local = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    local += (unsigned long long)data[i] * (i % 251 + 1);
  atomicAdd(result, local);
}

// Arithmetic with a tunable cost per element (pipeline benchmarks): out[i] = iters steps of x*0.999+0.5 from in[i].
extern "C" __global__ void burn(const float* in, float* out, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float x = in[i];
    for (int k = 0; k < iters; ++k) x = x * 0.999f + 0.5f;
    out[i] = x;
  }
}

// Faults for tests/fault_injection/gpu_faults_test.cpp.
extern "C" __global__ void trap_kernel() { __trap(); }
extern "C" __global__ void assert_zero(int v) { assert(v == 0); }
// Built for at most 256 threads per block: a launch of 1024 asks for more than the kernel has registers for.
extern "C" __global__ void __launch_bounds__(256) bounded_256(int* p) {
  if (p) p[threadIdx.x] = threadIdx.x;
}

// Programmatic dependent launch (tests/driver/dependent_launch_test.cpp, bench/driver/pdl_bench.cpp): waits for the
// grid before it on the stream (its writes are visible after the wait), then lets the next one start early.
extern "C" __global__ void chain_add_one(int* data, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
