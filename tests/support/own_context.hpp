// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// A context of a case's own on device 0 (cuCtxCreate), for what must not touch the primary context the other cases
// share: a fault that makes it unusable, a per-context module load counted from zero, a context destroyed early.
// Created current, it is popped at once (the calling thread is left as it was).
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/driver_api.hpp>

#include <stdexcept>
#include <utility>

namespace cuasync::test {

class own_context {
 public:
  own_context() {
    const auto& d = detail::driver();
    CUdevice dev = 0;
    if (d.cuDeviceGet(&dev, 0) != CUDA_SUCCESS || d.cuCtxCreate(&raw_, 0, dev) != CUDA_SUCCESS)
      throw std::runtime_error("test::own_context: cuCtxCreate on device 0 failed");
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
  }
  //! Destroys it unless `destroy` did already.
  ~own_context() { destroy(); }
  own_context(const own_context&) = delete;
  own_context& operator=(const own_context&) = delete;

  CUcontext get() const noexcept { return raw_; }
  context_ref ref() const { return context_ref::adopt(raw_); }
  //! cuCtxDestroy now (its result), e.g. while the case still holds a free of its memory.
  CUresult destroy() noexcept { return raw_ ? detail::driver().cuCtxDestroy(std::exchange(raw_, nullptr)) : CUDA_SUCCESS; }

 private:
  CUcontext raw_ = nullptr;
};

}  // namespace cuasync::test
