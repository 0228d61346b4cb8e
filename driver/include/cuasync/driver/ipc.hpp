// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Device memory and events shared between processes on one host (one process per GPU, as PyTorch and JAX
//! run), with the driver's legacy IPC handles: the exporter turns a `cuMemAlloc` allocation (`device_buffer`) or an
//! interprocess event (`event_options::interprocess`) into a handle of plain bytes, the application carries the
//! bytes to the other process (a Unix socket, a pipe, shared memory), and the importer opens them.
//!
//! - Memory from stream-ordered pools (`tracked_buffer`, `pool_buffer`) cannot be exported this way (the driver
//!   refuses it); export a `device_buffer`.
//! - The exporter must keep its allocation alive until every importer has closed its mapping.
//! - An importer on another device maps the memory with peer access enabled lazily
//!   (`CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`): kernels and copies there read it over NVLink or PCIe.
//! - Memory made with `cuMemCreate` travels as a POSIX file descriptor instead: shareable_memory.hpp (the VMM path)
//!   and fd_passing.hpp; docs/scale-out.md says when to use which.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/event.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <span>

namespace cuasync {

//! What an importer needs to map another process's allocation: the driver's handle, the size and the exporter's
//! device. Trivially copyable; `to_bytes` / `from_bytes` give a checked wire form.
struct ipc_memory_handle {
  CUipcMemHandle handle{};
  std::uint64_t size = 0;
  std::int32_t device = -1;

  //! The handle of `memory` (the start of a `cuMemAlloc` allocation) in `ctx`. @throws cuda_error
  static ipc_memory_handle of(device_span memory, context_ref ctx,
                              std::source_location where = std::source_location::current());

  static constexpr std::size_t wire_size = 8 + sizeof(CUipcMemHandle) + 8 + 4;
  std::array<std::byte, wire_size> to_bytes() const noexcept;
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) when `bytes` is not a handle written by `to_bytes`
  static ipc_memory_handle from_bytes(std::span<const std::byte> bytes,
                                      std::source_location where = std::source_location::current());
};

//! Another process's memory mapped into this one (`cuIpcOpenMemHandle`). Move-only; closed when destroyed.
class ipc_mapping {
 public:
  ipc_mapping() = default;
  //! Maps `h` into `ctx` (which may be on another device than the exporter's). @throws cuda_error
  static ipc_mapping open(context_ref ctx, const ipc_memory_handle& h,
                          std::source_location where = std::source_location::current());
  ipc_mapping(ipc_mapping&& o) noexcept { *this = std::move(o); }
  ipc_mapping& operator=(ipc_mapping&& o) noexcept;
  ipc_mapping(const ipc_mapping&) = delete;
  ipc_mapping& operator=(const ipc_mapping&) = delete;
  //! `cuIpcCloseMemHandle`; a failure is deferred to the context. Never throws.
  ~ipc_mapping() { close_nothrow(); }

  device_span span() const noexcept { return {ptr_, size_}; }
  context_ref context() const noexcept { return ctx_; }
  explicit operator bool() const noexcept { return ptr_ != 0; }

 private:
  void close_nothrow() noexcept;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  context_ref ctx_;
};

//! An interprocess event's handle (`cuIpcGetEventHandle`): the importer's streams can wait on the exporter's work.
struct ipc_event_handle {
  CUipcEventHandle handle{};
  //! The handle of `e`, created with `event_options::interprocess`. @throws cuda_error
  static ipc_event_handle of(event_ref e, std::source_location where = std::source_location::current());
  //! Opens it in `ctx` as an owned event (`cuIpcOpenEventHandle`): wait on it, query it; never record it here.
  //! @throws cuda_error
  event open(context_ref ctx, std::source_location where = std::source_location::current()) const;
};

}  // namespace cuasync
