// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A stand-in for libcuda.so.1 for the loader tests (no GPU needed). FAKE_CUDA_MODE chooses its behaviour:
//   no_device  cuInit answers CUDA_ERROR_NO_DEVICE
//   too_old    cuInit succeeds, cuDriverGetVersion says 11.8, and entry points added after 11.8 are missing
//   stub       every call answers CUDA_ERROR_STUB_LIBRARY, like the toolkit's stub
#include <cuda.h>

#include <cstdlib>
#include <cstring>

namespace {
const char* mode() {
  const char* m = std::getenv("FAKE_CUDA_MODE");
  return m ? m : "";
}
CUresult CUDAAPI fake_init(unsigned) {
  if (!std::strcmp(mode(), "no_device")) return CUDA_ERROR_NO_DEVICE;
  if (!std::strcmp(mode(), "stub")) return CUDA_ERROR_STUB_LIBRARY;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI fake_driver_version(int* v) {
  *v = 11080;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI fake_anything() { return CUDA_ERROR_NOT_SUPPORTED; }
}  // namespace

extern "C" CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t,
                                                CUdriverProcAddressQueryResult* status) {
  if (!std::strcmp(mode(), "stub")) return CUDA_ERROR_STUB_LIBRARY;
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  if (!std::strcmp(symbol, "cuInit")) {
    *pfn = reinterpret_cast<void*>(&fake_init);
  } else if (!std::strcmp(symbol, "cuDriverGetVersion")) {
    *pfn = reinterpret_cast<void*>(&fake_driver_version);
  } else if (version > 11080) {
    *pfn = nullptr;
    *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  } else {
    *pfn = reinterpret_cast<void*>(&fake_anything);
  }
  return CUDA_SUCCESS;
}
