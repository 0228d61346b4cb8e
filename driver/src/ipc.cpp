// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/ipc.hpp>

#include <cstring>
#include <optional>
#include <utility>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

namespace {
constexpr char wire_tag[8] = {'c', 'u', 'a', 'i', 'p', 'c', 'm', '1'};
}

ipc_memory_handle ipc_memory_handle::of(device_span memory, context_ref ctx, std::source_location where) {
  constexpr const char* api = "cuasync::ipc_memory_handle::of";
  if (!ctx) detail::throw_invalid(api, "empty context", where);
  if (!memory.ptr || !memory.size) detail::throw_invalid(api, "empty memory", where);
  scoped_context guard(ctx, where);
  ipc_memory_handle h;
  if (CUresult r = driver().cuIpcGetMemHandle(&h.handle, memory.ptr); r != CUDA_SUCCESS)
    throw_cu(r, "cuIpcGetMemHandle",
             "device " + std::to_string(ctx.device_ordinal()) + ", " + std::to_string(memory.size) +
                 " B (a cuMemAlloc allocation's start; pool memory cannot be exported)",
             where);
  h.size = memory.size;
  h.device = ctx.device_ordinal();
  return h;
}

std::array<std::byte, ipc_memory_handle::wire_size> ipc_memory_handle::to_bytes() const noexcept {
  std::array<std::byte, wire_size> out{};
  std::byte* p = out.data();
  std::memcpy(p, wire_tag, 8);
  std::memcpy(p + 8, &handle, sizeof handle);
  std::memcpy(p + 8 + sizeof handle, &size, 8);
  std::memcpy(p + 16 + sizeof handle, &device, 4);
  return out;
}

ipc_memory_handle ipc_memory_handle::from_bytes(std::span<const std::byte> bytes, std::source_location where) {
  constexpr const char* api = "cuasync::ipc_memory_handle::from_bytes";
  if (bytes.size() != wire_size)
    detail::throw_invalid(api, std::to_string(bytes.size()) + " bytes, expected " + std::to_string(wire_size), where);
  if (std::memcmp(bytes.data(), wire_tag, 8) != 0) detail::throw_invalid(api, "not a cuasync IPC memory handle", where);
  ipc_memory_handle h;
  std::memcpy(&h.handle, bytes.data() + 8, sizeof h.handle);
  std::memcpy(&h.size, bytes.data() + 8 + sizeof h.handle, 8);
  std::memcpy(&h.device, bytes.data() + 16 + sizeof h.handle, 4);
  if (h.size == 0 || h.device < 0) detail::throw_invalid(api, "an empty handle", where);
  return h;
}

ipc_mapping ipc_mapping::open(context_ref ctx, const ipc_memory_handle& h, std::source_location where) {
  if (!ctx) detail::throw_invalid("cuasync::ipc_mapping::open", "empty context", where);
  if (h.size == 0) detail::throw_invalid("cuasync::ipc_mapping::open", "an empty handle", where);
  scoped_context guard(ctx, where);
  ipc_mapping m;
  if (CUresult r = driver().cuIpcOpenMemHandle(&m.ptr_, h.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuIpcOpenMemHandle",
             "device " + std::to_string(h.device) + "'s memory into device " + std::to_string(ctx.device_ordinal()),
             where);
  m.size_ = h.size;
  m.ctx_ = ctx;
  return m;
}

ipc_mapping& ipc_mapping::operator=(ipc_mapping&& o) noexcept {
  if (this != &o) {
    close_nothrow();
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
    ctx_ = o.ctx_;
  }
  return *this;
}

void ipc_mapping::close_nothrow() noexcept {
  if (!ptr_) return;
  detail::release_nothrow(ctx_.get(), "cuIpcCloseMemHandle", reinterpret_cast<const void*>(ptr_),
                          [&](const detail::driver_entry_points& d) { return d.cuIpcCloseMemHandle(ptr_); });
  ptr_ = 0;
}

ipc_event_handle ipc_event_handle::of(event_ref e, std::source_location where) {
  if (!e) detail::throw_invalid("cuasync::ipc_event_handle::of", "empty event", where);
  ipc_event_handle h;
  // The driver asks for a current context (CUDA_ERROR_INVALID_CONTEXT without one): the event's.
  std::optional<scoped_context> guard;
  if (e.context()) guard.emplace(e.context(), where);
  if (CUresult r = driver().cuIpcGetEventHandle(&h.handle, e.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuIpcGetEventHandle", "an event made with event_options::interprocess", where);
  return h;
}

event ipc_event_handle::open(context_ref ctx, std::source_location where) const {
  if (!ctx) detail::throw_invalid("cuasync::ipc_event_handle::open", "empty context", where);
  scoped_context guard(ctx, where);
  CUevent e = nullptr;
  if (CUresult r = driver().cuIpcOpenEventHandle(&e, handle); r != CUDA_SUCCESS)
    throw_cu(r, "cuIpcOpenEventHandle", "into device " + std::to_string(ctx.device_ordinal()), where);
  return event::from_native_handle(e, ctx);
}

}  // namespace cuasync
