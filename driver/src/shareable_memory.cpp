// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The VMM path of IPC: cuMemCreate'd memory exported and imported as a POSIX file descriptor.
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/shareable_memory.hpp>
#include <cuasync/trace/hooks.hpp>

#include <cstdint>
#include <utility>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

namespace {

CUmemAllocationProp shareable_prop(int device_ordinal, std::source_location where) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = cuasync::device::get(device_ordinal, where).native_handle();
  return p;
}

std::size_t round_up(std::size_t n, std::size_t granularity) {
  return (n + granularity - 1) / granularity * granularity;
}

std::string mib(std::size_t n) { return std::to_string(n) + " B (" + std::to_string(n >> 20) + " MiB)"; }

}  // namespace

// ---- detail::vmm_mapping

std::size_t detail::shareable_granularity(int device_ordinal, std::source_location where) {
  const CUmemAllocationProp prop = shareable_prop(device_ordinal, where);
  std::size_t g = 0;
  if (CUresult r = driver().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemGetAllocationGranularity",
             "pinned memory on device " + std::to_string(device_ordinal) + " exportable as a POSIX file descriptor",
             where);
  if (g == 0) g = 1;
  return g;
}

detail::vmm_mapping::vmm_mapping(context_ref ctx, CUmemGenericAllocationHandle handle, std::size_t bytes,
                                 const std::string& what, std::source_location where)
    : ctx_(ctx), handle_(handle), size_(bytes) {
  // A constructor that throws runs no destructor: undo what was done (the handle is ours from the first line).
  struct undo_on_failure {
    vmm_mapping& m;
    bool armed = true;
    ~undo_on_failure() {
      if (armed) m.reset();
    }
  } undo{*this};
  const auto& d = driver();
  if (CUresult r = d.cuMemAddressReserve(&ptr_, bytes, 0, 0, 0); r != CUDA_SUCCESS) {
    ptr_ = 0;
    throw_cu(r, "cuMemAddressReserve", what, where);
  }
  if (CUresult r = d.cuMemMap(ptr_, bytes, 0, handle_, 0); r != CUDA_SUCCESS) throw_cu(r, "cuMemMap", what, where);
  mapped_ = true;
  // Mapped memory is not accessible until access is set, on the whole mapped range; other devices get none.
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ctx.device(where).native_handle();
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = d.cuMemSetAccess(ptr_, bytes, &access, 1); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemSetAccess", what + ", read/write for device " + std::to_string(ctx.device_ordinal()), where);
  undo.armed = false;
}

detail::vmm_mapping& detail::vmm_mapping::operator=(vmm_mapping&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    handle_ = std::exchange(o.handle_, 0);
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

void detail::vmm_mapping::reset() noexcept {
  // The driver's order: unmap, release the handle (the memory goes once nothing maps or exports it), free the range.
  const void* at = reinterpret_cast<const void*>(ptr_);
  if (mapped_)
    release_nothrow(ctx_.get(), "cuMemUnmap", at,
                    [&](const driver_entry_points& d) { return d.cuMemUnmap(ptr_, size_); });
  if (handle_) {
    trace::host_call hooked(trace::category::alloc, "cuMemRelease", size_);
    release_nothrow(ctx_.get(), "cuMemRelease", at,
                    [&](const driver_entry_points& d) { return d.cuMemRelease(handle_); });
  }
  if (ptr_)
    release_nothrow(ctx_.get(), "cuMemAddressFree", at,
                    [&](const driver_entry_points& d) { return d.cuMemAddressFree(ptr_, size_); });
  handle_ = 0;
  ptr_ = 0;
  size_ = 0;
  mapped_ = false;
}

// ---- shareable_allocation

bool shareable_allocation::supported(cuasync::device dev, std::source_location where) {
  return dev.attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, where) != 0 &&
         dev.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, where) != 0;
}

shareable_allocation shareable_allocation::allocate(context_ref ctx, std::size_t bytes, std::source_location where) {
  constexpr const char* api = "cuasync::shareable_allocation::allocate";
  if (!ctx) detail::throw_invalid(api, "empty context", where);
  if (bytes == 0) detail::throw_invalid(api, "zero-byte allocation", where);
  const int dev = ctx.device_ordinal();
  if (!supported(ctx.device(where), where))
    throw_cu(CUDA_ERROR_NOT_SUPPORTED, api,
             "device " + std::to_string(dev) +
                 " supports no virtual memory management or no POSIX file descriptor handles "
                 "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "
                 "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED); share a device_buffer with "
                 "ipc_memory_handle instead",
             where);
  scoped_context guard(ctx, where);
  const std::size_t size = round_up(bytes, detail::shareable_granularity(dev, where));
  const CUmemAllocationProp prop = shareable_prop(dev, where);
  const std::string what = mib(size) + " on device " + std::to_string(dev);
  CUmemGenericAllocationHandle handle = 0;
  {
    trace::host_call hooked(trace::category::alloc, "cuMemCreate", size, 0, &where);
    if (CUresult r = driver().cuMemCreate(&handle, size, &prop, 0); r != CUDA_SUCCESS)
      throw_cu(r, "cuMemCreate", what + " exportable as a POSIX file descriptor", where);
  }
  shareable_allocation a;
  a.mapping_ = detail::vmm_mapping(ctx, handle, size, what, where);
  return a;
}

unique_fd shareable_allocation::export_fd(std::source_location where) const {
  if (!*this) detail::throw_invalid("cuasync::shareable_allocation::export_fd", "empty allocation", where);
  scoped_context guard(context(), where);
  int fd = -1;
  if (CUresult r = driver().cuMemExportToShareableHandle(&fd, native_handle(), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                         0);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemExportToShareableHandle",
             "POSIX file descriptor of " + mib(size()) + " on device " + std::to_string(context().device_ordinal()),
             where);
  return unique_fd(fd);
}

// ---- shareable_mapping

shareable_mapping shareable_mapping::open(context_ref ctx, int fd, std::size_t bytes, int exporter_device,
                                          std::source_location where) {
  constexpr const char* api = "cuasync::shareable_mapping::open";
  if (!ctx) detail::throw_invalid(api, "empty context", where);
  if (fd < 0) detail::throw_invalid(api, "no file descriptor (" + std::to_string(fd) + ")", where);
  if (bytes == 0) detail::throw_invalid(api, "zero bytes", where);
  scoped_context guard(ctx, where);
  // The allocation's granularity is its device's; the exporter's ordinal may name no device of this process.
  const int here = ctx.device_ordinal();
  const bool exporter_here = exporter_device >= 0 && exporter_device < cuasync::device::count(where);
  const std::size_t granularity = detail::shareable_granularity(exporter_here ? exporter_device : here, where);
  const std::size_t size = round_up(bytes, granularity);
  const std::string what = mib(size) + " of device " + std::to_string(exporter_device) + " (fd " + std::to_string(fd) +
                           ") into device " + std::to_string(here);
  CUmemGenericAllocationHandle handle = 0;
  if (CUresult r = driver().cuMemImportFromShareableHandle(
          &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemImportFromShareableHandle", what, where);
  shareable_mapping m;
  m.mapping_ = detail::vmm_mapping(ctx, handle, size, what, where);
  return m;
}

}  // namespace cuasync
