// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Sources shared by the jit and runtime tests. Each compile costs 10-100 ms on CI: tests compile few programs.
#include <cuasync/jit/program.hpp>

namespace cuasync::test {

//! Two templates (one in a namespace) and an extern "C" kernel.
inline const char* const templates_source = R"(
template <typename T, int Block>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  const int i = blockIdx.x * Block + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
namespace ns {
template <typename T>
__global__ void reduce(const T* in, T* out, int n) {
  T sum = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += in[i];
  atomicAdd(out, sum);
}
}  // namespace ns
extern "C" __global__ void fill(float* p, float v) { p[threadIdx.x] = v; }
)";

inline jit::program templates_program() {
  return jit::program("templates.cu", templates_source)
      .add_name_expression("saxpy<float, 256>")
      .add_name_expression("ns::reduce<double>");
}

//! A small program whose source differs by `tag`, so each tag is its own cache entry.
inline jit::program small_program(int tag) {
  return jit::program("small_" + std::to_string(tag) + ".cu",
                      "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = " + std::to_string(tag) + "; }\n");
}

}  // namespace cuasync::test
