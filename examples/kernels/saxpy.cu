// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// An example kernel file for `cuasync compile` and the JIT: templates are instantiated by name expressions, e.g.
//   cuasync compile examples/kernels/saxpy.cu --name-expression 'saxpy<float>' --name-expression 'scale<double, 4>'
// prints each expression's lowered (mangled) name, which module_ref::kernel() accepts after loading (the runtime's
// kernel_cache registers the expressions, so kernel("saxpy<float>") works directly).

// y = a * x + y
template <typename T>
__global__ void saxpy(T a, const T* __restrict__ x, T* __restrict__ y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y[i];
}

// out = factor * in, each thread handling Unroll consecutive elements.
template <typename T, int Unroll>
__global__ void scale(const T* __restrict__ in, T* __restrict__ out, T factor, int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * Unroll;
#pragma unroll
  for (int u = 0; u < Unroll; ++u)
    if (base + u < n) out[base + u] = factor * in[base + u];
}
