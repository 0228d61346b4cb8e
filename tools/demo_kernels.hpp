// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The demo's kernels (JIT-compiled with NVRTC at run time) and the host side of their contract: how a request's input
// is filled, and what its output must be, so that every response is checked.
//
// demo_infer runs `iters` steps of v = v * a + b from v = in[i] + bias. With a = 1 - 1/iters and b = 500 (1 - a),
// v converges towards 500 by a factor a^iters (~0.37) whatever `iters` the calibration picks, so the output still
// depends on the input and on the request's bias: a stale or misplaced response is caught.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <cstddef>
#include <span>

namespace cuasync::tools::demo {

inline constexpr const char* kernel_program_name = "cuasync_demo";
inline constexpr const char* kernel_source = R"(
extern "C" __global__ void demo_infer(float* out, const float* in, int n, float bias, float a, float b, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = in[i] + bias;
    for (int k = 0; k < iters; ++k) v = v * a + b;
    out[i] = v;
  }
}
extern "C" __global__ void demo_empty() {}
)";

//! The parameters of request `request` for a kernel calibrated to `iters` steps.
struct infer_params {
  float bias, a, b;
  int iters;
  static infer_params for_request(std::size_t request, int iters) {
    const float a = 1.0f - 1.0f / static_cast<float>(iters);
    return {64.0f * static_cast<float>(request % 61), a, 500.0f * (1.0f - a), iters};
  }
};

//! The CPU preprocess: the request's features (a pattern shifted by the request, so each request differs):
//! in[i] = (i + request) mod 1024. Copied from a table in blocks of 1,024: memory speed, 3x a per-element loop here.
//! `fill_part` fills the part of the input that starts at index `offset` (a request's preprocess split into parts).
inline void fill_part(std::span<float> in, std::size_t offset, std::size_t request) {
  static const std::array<float, 2048> table = [] {
    std::array<float, 2048> t{};
    for (std::size_t j = 0; j < t.size(); ++j) t[j] = static_cast<float>(j & 1023);
    return t;
  }();
  const float* from = table.data() + ((offset + request) & 1023);  // the period is 1,024: every block starts here
  for (std::size_t i = 0; i < in.size(); i += 1024)
    std::memcpy(in.data() + i, from, sizeof(float) * std::min<std::size_t>(1024, in.size() - i));
}
inline void fill_input(std::span<float> in, std::size_t request) { fill_part(in, 0, request); }

//! What the kernel computes at index `i` of request `request`: the closed form of its recurrence.
inline double expected_output(std::size_t i, std::size_t request, int iters) {
  const infer_params p = infer_params::for_request(request, iters);
  const double limit = p.b / (1.0 - p.a), decay = std::pow(static_cast<double>(p.a), iters);
  return decay * (static_cast<double>((i + request) & 1023) + p.bias - limit) + limit;
}

//! The CPU postprocess: checks a sample of the response (every 61st value and the last) against the closed form of
//! the kernel's recurrence. Returns the index of the first wrong value, or -1. `check_part` checks the part of the
//! response that starts at index `offset` and returns an index into the whole response.
inline long check_part(std::span<const float> out, std::size_t offset, std::size_t request, int iters) {
  const infer_params p = infer_params::for_request(request, iters);
  const double limit = p.b / (1.0 - p.a), decay = std::pow(static_cast<double>(p.a), iters);
  // Float rounding in each step, damped by a: at most ~3e-4 * iters for values up to ~5,000.
  const double tolerance = 4e-4 * iters + 1e-3 * limit;
  auto wrong = [&](std::size_t i) {
    const double x = static_cast<double>((offset + i + request) & 1023) + p.bias;
    return std::abs(out[i] - (decay * (x - limit) + limit)) > tolerance;
  };
  for (std::size_t i = 0; i < out.size(); i += 61)
    if (wrong(i)) return static_cast<long>(offset + i);
  if (!out.empty() && wrong(out.size() - 1)) return static_cast<long>(offset + out.size() - 1);
  return -1;
}
inline long check_output(std::span<const float> out, std::size_t request, int iters) {
  return check_part(out, 0, request, iters);
}

}  // namespace cuasync::tools::demo
