// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/pointer_info.hpp>

namespace cuasync {

memory_kind classify_pointer(const void* p) {
  // cuPointerGetAttributes, not cuPointerGetAttribute: memory the driver does not know (ordinary malloc/new/stack
  // memory) reads as type 0 with CUDA_SUCCESS instead of an API error (which compute-sanitizer would report), and
  // one call answers both questions.
  unsigned managed = 0;
  CUmemorytype type{};
  CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  void* data[2] = {&managed, &type};
  if (detail::driver().cuPointerGetAttributes(2, attrs, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
    return memory_kind::pageable_host;
  if (managed) return memory_kind::managed;
  switch (type) {
    case CU_MEMORYTYPE_HOST: return memory_kind::pinned_host;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return memory_kind::device;
    case CU_MEMORYTYPE_UNIFIED: return memory_kind::managed;
  }
  return memory_kind::pageable_host;
}

}  // namespace cuasync
