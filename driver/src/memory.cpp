// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The owning memory types: device, pinned host, registered host and managed memory.
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/detail/context_life.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/host_registration.hpp>
#include <cuasync/driver/managed_buffer.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/trace/hooks.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

namespace {
std::string bytes_on(std::size_t n, context_ref ctx) {
  return std::to_string(n) + " bytes on device " + std::to_string(ctx.device_ordinal());
}
void require_nonzero(std::size_t n, const char* api, std::source_location w) {
  if (n == 0) detail::throw_invalid(api, "zero-byte allocation", w);
}
// Move-assignment shared by the owners below: free what is held, then take the other's fields.
template <class T>
T& move_assign(T& self, T&& other) noexcept {
  if (&self != &other) {
    self.~T();
    new (&self) T(std::move(other));
  }
  return self;
}
// The blocking frees, as the reaper takes them (blocking_free.hpp).
CUresult free_device(const detail::driver_entry_points& d, const void* p, std::size_t) {
  return d.cuMemFree(reinterpret_cast<CUdeviceptr>(p));
}
CUresult free_host(const detail::driver_entry_points& d, const void* p, std::size_t) {
  return d.cuMemFreeHost(const_cast<void*>(p));
}

// ---- the host memory of a registered pinned buffer: a mapping of its own
constexpr std::size_t host_page = 4096, huge_page = std::size_t{2} << 20;
// Transparent huge pages for registered blocks of 2 MiB and more (the staging copies' host side writes or reads them
// with fewer TLB misses) unless CUASYNC_PINNED_HUGE_PAGES=0 (read once; for measuring the two side by side).
bool huge_pages_wanted() noexcept {
  static const bool wanted = [] {
    const char* v = std::getenv("CUASYNC_PINNED_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return wanted;
}
std::size_t mapping_page(std::size_t bytes) noexcept {
  return bytes >= huge_page && huge_pages_wanted() ? huge_page : host_page;
}
// The mapping's length for a buffer of `bytes` (the same at the free: the choice above is read once).
std::size_t mapping_length(std::size_t bytes) noexcept {
  const std::size_t page = mapping_page(bytes);
  return (bytes + page - 1) / page * page;
}
// Its own anonymous mapping, aligned to its page, never shared with other objects (as memory from the heap could
// be) and not inherited by a child (MADV_DONTFORK): after a fork, a copy-on-write of a registered page would leave the
// parent's writes where the device does not look (the DMA's pages stay the child's). Null when out of memory.
void* map_host(std::size_t bytes) noexcept {
  const std::size_t page = mapping_page(bytes), length = mapping_length(bytes), extra = page - host_page;
  void* raw = ::mmap(nullptr, length + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(raw), start = (at + page - 1) / page * page;
  if (start > at) ::munmap(raw, start - at);  // the ends that alignment left over
  if (const std::uintptr_t end = at + length + extra; end > start + length)
    ::munmap(reinterpret_cast<void*>(start + length), end - (start + length));
  void* p = reinterpret_cast<void*>(start);
  (void)::madvise(p, length, MADV_DONTFORK);
  if (page == huge_page) (void)::madvise(p, length, MADV_HUGEPAGE);  // a hint: refused where THP is off
  return p;
}
void unmap_host(const void* p, std::size_t bytes) noexcept { ::munmap(const_cast<void*>(p), mapping_length(bytes)); }
// A registered pinned buffer's host memory is unmapped once its registration is gone: after a successful unregister,
// or (on the reaper) when its context's life ended and took the registration along.
CUresult unregister_host(const detail::driver_entry_points& d, const void* p, std::size_t bytes) {
  const CUresult r = d.cuMemHostUnregister(const_cast<void*>(p));
  if (r == CUDA_SUCCESS) unmap_host(p, bytes);  // (a failed try is retried: unmapped after the retry only)
  return r;
}
void free_unregistered(const void* p, std::size_t bytes) noexcept { unmap_host(p, bytes); }
}  // namespace

// ---- device_buffer
device_buffer::device_buffer(CUdeviceptr p, std::size_t n, context_ref ctx) noexcept
    : ptr_(p), size_(n), ctx_(ctx), life_(ctx ? detail::context_life(ctx.get()) : 0) {}
device_buffer device_buffer::allocate(context_ref ctx, std::size_t bytes, std::source_location where) {
  require_nonzero(bytes, "cuasync::device_buffer::allocate", where);
  scoped_context guard(ctx, where);
  CUdeviceptr p = 0;
  trace::host_call hooked(trace::category::alloc, "cuMemAlloc", bytes, 0, &where);
  if (CUresult r = driver().cuMemAlloc(&p, bytes); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemAlloc", bytes_on(bytes, ctx), where);
  return device_buffer(p, bytes, ctx);
}
device_buffer& device_buffer::operator=(device_buffer&& o) noexcept { return move_assign(*this, std::move(o)); }
void device_buffer::free_nothrow() noexcept {
  if (!ptr_) return;
  // cuMemFree waits for the whole device to be idle: on a thread that must not block (an io thread) the reaper makes
  // it (blocking_free.hpp); elsewhere the watchdog names it when it blocks.
  detail::release_blocking_nothrow(ctx_.get(), life_, "cuMemFree", reinterpret_cast<const void*>(ptr_), size_,
                                   free_device);
  ptr_ = 0;
}

// ---- pinned_buffer
pinned_buffer::pinned_buffer(void* p, std::size_t n, context_ref ctx, bool registered) noexcept
    : ptr_(p), size_(n), ctx_(ctx), life_(ctx ? detail::context_life(ctx.get()) : 0), registered_(registered) {}
pinned_buffer pinned_buffer::allocate(context_ref ctx, std::size_t bytes, std::source_location where) {
  require_nonzero(bytes, "cuasync::pinned_buffer::allocate", where);
  scoped_context guard(ctx, where);
  void* p = nullptr;
  trace::host_call hooked(trace::category::alloc, "cuMemHostAlloc", bytes, 0, &where);
  if (CUresult r = driver().cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemHostAlloc", bytes_on(bytes, ctx), where);
  return pinned_buffer(p, bytes, ctx, false);
}
pinned_buffer pinned_buffer::allocate_registered(context_ref ctx, std::size_t bytes, std::source_location where) {
  require_nonzero(bytes, "cuasync::pinned_buffer::allocate_registered", where);
  if (bytes > SIZE_MAX - 2 * huge_page)
    throw_cu(CUDA_ERROR_OUT_OF_MEMORY, "cuasync::pinned_buffer::allocate_registered", bytes_on(bytes, ctx), where);
  const std::size_t whole_pages = mapping_length(bytes);
  struct unmap {
    std::size_t bytes;
    void operator()(void* p) const noexcept { unmap_host(p, bytes); }
  };
  std::unique_ptr<void, unmap> host(map_host(bytes), unmap{bytes});
  if (!host) throw_cu(CUDA_ERROR_OUT_OF_MEMORY, "mmap (host memory to register)", bytes_on(bytes, ctx), where);
  // The pages are faulted in here, outside the driver: the registration then only pins them.
  std::memset(host.get(), 0, whole_pages);
  scoped_context guard(ctx, where);
  trace::host_call hooked(trace::category::alloc, "cuMemHostRegister", bytes, 0, &where);
  if (CUresult r = driver().cuMemHostRegister(host.get(), whole_pages,
                                              CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemHostRegister", bytes_on(bytes, ctx) + " (a pinned buffer made by registration)", where);
  return pinned_buffer(host.release(), bytes, ctx, true);
}
pinned_buffer& pinned_buffer::operator=(pinned_buffer&& o) noexcept { return move_assign(*this, std::move(o)); }
void pinned_buffer::free_nothrow() noexcept {
  if (!ptr_) return;
  if (registered_)  // waits for the device too, as cuMemFreeHost
    detail::release_blocking_nothrow(ctx_.get(), life_, "cuMemHostUnregister", ptr_, size_, unregister_host,
                                     free_unregistered);
  else
    detail::release_blocking_nothrow(ctx_.get(), life_, "cuMemFreeHost", ptr_, size_, free_host);  // waits too
  ptr_ = nullptr;
}
CUdeviceptr pinned_buffer::device_pointer(std::source_location where) const {
  scoped_context guard(ctx_, where);
  CUdeviceptr p = 0;
  if (CUresult r = driver().cuMemHostGetDevicePointer(&p, ptr_, 0); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemHostGetDevicePointer", bytes_on(size_, ctx_), where);
  return p;
}

// ---- host_registration
host_registration host_registration::register_memory(context_ref ctx, void* ptr, std::size_t bytes,
                                                     std::source_location where) {
  if (!ptr) detail::throw_invalid("cuasync::host_registration::register_memory", "null pointer", where);
  require_nonzero(bytes, "cuasync::host_registration::register_memory", where);
  scoped_context guard(ctx, where);
  trace::host_call hooked(trace::category::alloc, "cuMemHostRegister", bytes, 0, &where);
  if (CUresult r = driver().cuMemHostRegister(ptr, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemHostRegister",
             bytes_on(bytes, ctx) + " at " + detail::handle_string(ptr) +
                 (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? " (already registered)" : ""),
             where);
  return host_registration(ptr, bytes, ctx);
}
host_registration& host_registration::operator=(host_registration&& o) noexcept {
  return move_assign(*this, std::move(o));
}
void host_registration::unregister_nothrow() noexcept {
  if (!ptr_) return;
  trace::host_call hooked(trace::category::alloc, "cuMemHostUnregister", size_);
  detail::release_nothrow(ctx_.get(), "cuMemHostUnregister", ptr_,
                          [&](const detail::driver_entry_points& d) { return d.cuMemHostUnregister(ptr_); });
  ptr_ = nullptr;
}

// ---- managed_buffer
managed_buffer::managed_buffer(CUdeviceptr p, std::size_t n, context_ref ctx) noexcept
    : ptr_(p), size_(n), ctx_(ctx), life_(ctx ? detail::context_life(ctx.get()) : 0) {}
managed_buffer managed_buffer::allocate(context_ref ctx, std::size_t bytes, std::source_location where) {
  require_nonzero(bytes, "cuasync::managed_buffer::allocate", where);
  scoped_context guard(ctx, where);
  CUdeviceptr p = 0;
  trace::host_call hooked(trace::category::alloc, "cuMemAllocManaged", bytes, 0, &where);
  if (CUresult r = driver().cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemAllocManaged", bytes_on(bytes, ctx), where);
  return managed_buffer(p, bytes, ctx);
}
managed_buffer& managed_buffer::operator=(managed_buffer&& o) noexcept { return move_assign(*this, std::move(o)); }
void managed_buffer::free_nothrow() noexcept {
  if (!ptr_) return;
  detail::release_blocking_nothrow(ctx_.get(), life_, "cuMemFree", reinterpret_cast<const void*>(ptr_), size_,
                                   free_device);
  ptr_ = 0;
}
void managed_buffer::prefetch_async(stream_ref s, memory_location location, std::source_location where) const {
  prefetch_async(s, location, span(), where);
}
void managed_buffer::prefetch_async(stream_ref s, memory_location location, device_span range,
                                    std::source_location where) const {
  if (!s) detail::throw_invalid("cuasync::managed_buffer::prefetch_async", "empty stream", where);
  // Without overflow: a range whose end wraps around the address space must not pass for one inside.
  if (range.size == 0 || range.ptr < ptr_ || range.ptr - ptr_ > size_ || range.size > size_ - (range.ptr - ptr_))
    detail::throw_invalid("cuasync::managed_buffer::prefetch_async",
                          "range of " + std::to_string(range.size) + " bytes is empty or outside the buffer of " +
                              std::to_string(size_) + " bytes",
                          where);
  CUmemLocation loc{};
  loc.type = location.type;
  loc.id = location.id;
  scoped_context guard(ctx_, where);
  if (CUresult r = driver().cuMemPrefetchAsync(range.ptr, range.size, loc, 0, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPrefetchAsync", std::to_string(range.size) + " bytes on " + s.describe(), where);
}
void managed_buffer::advise(CUmem_advise advice, memory_location location, std::source_location where) const {
  CUmemLocation loc{};
  loc.type = location.type;
  loc.id = location.id;
  scoped_context guard(ctx_, where);  // cuMemAdvise needs a current context
  if (CUresult r = driver().cuMemAdvise(ptr_, size_, advice, loc); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemAdvise", "advice " + std::to_string(int(advice)) + " on " + bytes_on(size_, ctx_), where);
}

}  // namespace cuasync
