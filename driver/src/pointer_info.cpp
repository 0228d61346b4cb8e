#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/pointer_info.hpp>

namespace cuasync {

memory_kind classify_pointer(const void* p) {
  const auto& d = detail::driver();
  const auto addr = reinterpret_cast<CUdeviceptr>(p);
  unsigned managed = 0;
  if (d.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, addr) == CUDA_SUCCESS && managed)
    return memory_kind::managed;
  CUmemorytype type{};
  // Memory the driver does not know (ordinary malloc/new/stack memory) answers CUDA_ERROR_INVALID_VALUE.
  if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr) != CUDA_SUCCESS)
    return memory_kind::pageable_host;
  switch (type) {
    case CU_MEMORYTYPE_HOST: return memory_kind::pinned_host;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return memory_kind::device;
    case CU_MEMORYTYPE_UNIFIED: return memory_kind::managed;
  }
  return memory_kind::pageable_host;
}

}  // namespace cuasync
