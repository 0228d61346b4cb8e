// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Device memory shared between processes through a POSIX file descriptor (the driver's virtual memory
//! management, VMM): the exporter makes a `shareable_allocation` (`cuMemCreate` with the POSIX fd handle type, mapped
//! at an address range of its own), exports it as a file descriptor, and sends the descriptor to the other process
//! over a Unix socket (`send_fd`, fd_passing.hpp); the importer maps it with `shareable_mapping::open`.
//!
//! - Unlike the legacy handles (ipc.hpp), the descriptor is a capability: only a process it was passed to can map the
//!   memory, and the memory lives until the exporter has released its allocation, every importer has unmapped it,
//!   and every descriptor of it is closed.
//! - Sizes are whole multiples of the allocation granularity (2 MiB on an H200): `allocate` rounds up.
//! - An importer on another device gets read/write access through `cuMemSetAccess` (NVLink or PCIe peer access; no
//!   context-wide `cuCtxEnablePeerAccess` is needed).
//! - Memory from `device_buffer` or the stream-ordered pools cannot be exported this way.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/unique_fd.hpp>

#include <cstddef>
#include <source_location>
#include <string>

namespace cuasync {

namespace detail {
//! An allocation handle mapped at an address range reserved for it, readable and writable by one context's device:
//! what both ends of the fd path own. Move-only; releases in the driver's order (unmap, release the handle, free the
//! address range), each failure deferred to the context.
class vmm_mapping {
 public:
  vmm_mapping() = default;
  //! Owns `handle` from now on (released even when this throws), reserves `bytes` (a multiple of the granularity) of
  //! address space, maps the handle there and gives `ctx`'s device read/write access. `what` names the memory in
  //! errors. Call with `ctx` current. @throws cuda_error naming the failed call
  vmm_mapping(context_ref ctx, CUmemGenericAllocationHandle handle, std::size_t bytes, const std::string& what,
              std::source_location where);
  vmm_mapping(vmm_mapping&& o) noexcept { *this = std::move(o); }
  vmm_mapping& operator=(vmm_mapping&& o) noexcept;
  vmm_mapping(const vmm_mapping&) = delete;
  vmm_mapping& operator=(const vmm_mapping&) = delete;
  ~vmm_mapping() { reset(); }

  //! Unmaps, releases the handle and frees the address range; failures are deferred to the context. Never throws.
  void reset() noexcept;
  CUmemGenericAllocationHandle handle() const noexcept { return handle_; }
  device_span span() const noexcept { return {mapped_ ? ptr_ : 0, mapped_ ? size_ : 0}; }
  context_ref context() const noexcept { return ctx_; }

 private:
  context_ref ctx_;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr ptr_ = 0;  // the reserved range, mapped when mapped_
  std::size_t size_ = 0;
  bool mapped_ = false;
};

//! `cuMemGetAllocationGranularity(CU_MEM_ALLOC_GRANULARITY_MINIMUM)` of pinned device memory on `device_ordinal`
//! that can be exported as a POSIX file descriptor. @throws cuda_error
std::size_t shareable_granularity(int device_ordinal, std::source_location where);
}  // namespace detail

//! Device memory of one context's device that can be exported as a POSIX file descriptor. Move-only; a moved-from
//! allocation is empty. Destruction unmaps and releases it (importers' mappings stay valid); failures are deferred
//! to the context (`take_deferred_error`), never thrown.
class shareable_allocation {
 public:
  shareable_allocation() = default;

  //! Whether `dev` supports virtual memory management and POSIX file descriptor handles
  //! (`CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED`, `..._HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED`).
  //! @throws cuda_error when the attributes cannot be read
  static bool supported(cuasync::device dev, std::source_location where = std::source_location::current());

  //! Allocates at least `bytes` (> 0; rounded up to the granularity) on `ctx`'s device, mapped read/write there.
  //! @throws cuda_error: CUDA_ERROR_NOT_SUPPORTED naming the device when `supported` is false; otherwise naming the
  //! failed call (CUDA_ERROR_OUT_OF_MEMORY from `cuMemCreate`), the size and the device
  static shareable_allocation allocate(context_ref ctx, std::size_t bytes,
                                       std::source_location where = std::source_location::current());

  //! A new file descriptor of this allocation (`cuMemExportToShareableHandle`), owned by the caller. Send it with
  //! `send_fd`, then close it: the receiver's copy keeps the memory reachable. @throws cuda_error
  unique_fd export_fd(std::source_location where = std::source_location::current()) const;

  //! The whole allocation, mapped in this process. Empty when this allocation is.
  device_span span() const noexcept { return mapping_.span(); }
  //! The mapped size: `allocate`'s `bytes` rounded up to the granularity. What an importer passes to `open`.
  std::size_t size() const noexcept { return mapping_.span().size; }
  context_ref context() const noexcept { return mapping_.context(); }
  explicit operator bool() const noexcept { return mapping_.span().ptr != 0; }
  //! The driver's allocation handle (still owned by this object).
  CUmemGenericAllocationHandle native_handle() const noexcept { return mapping_.handle(); }

 private:
  detail::vmm_mapping mapping_;
};

//! Another process's (or this one's) `shareable_allocation`, imported from its file descriptor and mapped into one
//! context. Move-only; destruction unmaps it and releases the imported handle, failures deferred to the context.
class shareable_mapping {
 public:
  shareable_mapping() = default;

  //! Imports `fd` (`cuMemImportFromShareableHandle`), maps `bytes` of it (the exporter's `size()`; rounded up to the
  //! granularity) and gives `ctx`'s device read/write access: `ctx` may be on another device than the exporter's
  //! (`exporter_device`, for errors and the granularity), which then reaches the memory as a peer. Does not take
  //! ownership of `fd`: the caller may close it as soon as this returns.
  //! @throws cuda_error naming the failed call, the devices and the size
  static shareable_mapping open(context_ref ctx, int fd, std::size_t bytes, int exporter_device,
                                std::source_location where = std::source_location::current());

  device_span span() const noexcept { return mapping_.span(); }
  std::size_t size() const noexcept { return mapping_.span().size; }
  context_ref context() const noexcept { return mapping_.context(); }
  explicit operator bool() const noexcept { return mapping_.span().ptr != 0; }

 private:
  detail::vmm_mapping mapping_;
};

}  // namespace cuasync
