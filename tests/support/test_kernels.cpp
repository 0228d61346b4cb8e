// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "gpu.hpp"

#include <cstring>
#include <map>
#include <mutex>

extern "C" const unsigned char cuasync_test_kernels_cubin[], cuasync_test_kernels_cubin_end[];
extern "C" const unsigned char cuasync_test_kernels_ptx[], cuasync_test_kernels_ptx_end[];
extern "C" const unsigned char cuasync_test_kernels_fatbin[], cuasync_test_kernels_fatbin_end[];

namespace cuasync::test {

namespace {
std::span<const std::byte> bytes(const unsigned char* b, const unsigned char* e) {
  return {reinterpret_cast<const std::byte*>(b), static_cast<std::size_t>(e - b)};
}
}  // namespace

bool gpu_available(std::string* reason) {
  try {
    if (device::count() == 0) {
      *reason = "the driver reports no CUDA device";
      return false;
    }
    return true;
  } catch (const cuda_error& e) {
    *reason = e.what();
    return false;
  }
}

context_ref ctx() {
  static primary_context context = primary_context::retain(0);
  return context;
}

std::span<const std::byte> kernels_cubin() { return bytes(cuasync_test_kernels_cubin, cuasync_test_kernels_cubin_end); }
std::span<const std::byte> kernels_ptx() { return bytes(cuasync_test_kernels_ptx, cuasync_test_kernels_ptx_end); }
std::span<const std::byte> kernels_fatbin() {
  return bytes(cuasync_test_kernels_fatbin, cuasync_test_kernels_fatbin_end);
}

module_ref kernels() {
  static module m = module::load(ctx(), kernels_fatbin(), "test_kernels.fatbin");
  return m;
}

module_ref kernels(context_ref c) {
  if (c == ctx()) return kernels();
  // Other devices' primary contexts (multi-GPU tests): loaded once each, kept for the process.
  static std::mutex mutex;
  static std::map<CUcontext, module> loaded;
  std::lock_guard lock(mutex);
  auto it = loaded.find(c.get());
  if (it == loaded.end()) it = loaded.emplace(c.get(), module::load(c, kernels_fatbin(), "test_kernels.fatbin")).first;
  return it->second;
}

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> v(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const auto x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::byte>(rng() | 1);
  return v;
}

gate::gate() : flag_(pinned_buffer::allocate(ctx(), sizeof(int))) { *flag_.data<volatile int>() = 0; }

gate::~gate() { open(); }

void gate::close(stream_ref s) {
  *flag_.data<volatile int>() = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  launch(s, kernels(s.context()).kernel("spin_until_flag"), {.grid = 1, .block = 1}, flag_.data<int>());
}

void gate::open() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *flag_.data<volatile int>() = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace cuasync::test
