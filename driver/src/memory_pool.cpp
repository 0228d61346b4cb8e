// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/memory_pool.hpp>

#include <cuasync/trace/hooks.hpp>

namespace cuasync {

using detail::driver;
using detail::throw_cu;

namespace {
std::string pool_text(const memory_pool_ref& p) {
  return "pool " + detail::handle_string(p.get()) + ", device " + std::to_string(p.context().device_ordinal());
}
}  // namespace

memory_pool_ref memory_pool_ref::device_default(context_ref ctx, std::source_location where) {
  CUmemoryPool pool = nullptr;
  CUdevice dev = 0;
  detail::check(driver().cuDeviceGet(&dev, ctx.device_ordinal()), "cuDeviceGet", where);
  if (CUresult r = driver().cuDeviceGetDefaultMemPool(&pool, dev); r != CUDA_SUCCESS)
    throw_cu(r, "cuDeviceGetDefaultMemPool", "device " + std::to_string(ctx.device_ordinal()), where);
  return {pool, ctx};
}

void memory_pool_ref::set_release_threshold(std::uint64_t bytes, std::source_location where) const {
  cuuint64_t v = bytes;
  if (CUresult r = driver().cuMemPoolSetAttribute(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPoolSetAttribute", pool_text(*this), where);
}

void memory_pool_ref::grant_access(int peer, std::source_location where) const {
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = peer;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = driver().cuMemPoolSetAccess(pool_, &desc, 1); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPoolSetAccess", pool_text(*this) + " for device " + std::to_string(peer), where);
}

namespace {
std::uint64_t get_attr(const memory_pool_ref& p, CUmemPool_attribute a, std::source_location where) {
  cuuint64_t v = 0;
  if (CUresult r = driver().cuMemPoolGetAttribute(p.get(), a, &v); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPoolGetAttribute", pool_text(p), where);
  return v;
}
}  // namespace

std::uint64_t memory_pool_ref::release_threshold(std::source_location where) const {
  return get_attr(*this, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, where);
}
std::uint64_t memory_pool_ref::reserved_bytes(std::source_location where) const {
  return get_attr(*this, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, where);
}
std::uint64_t memory_pool_ref::used_bytes(std::source_location where) const {
  return get_attr(*this, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, where);
}

void memory_pool_ref::trim_to(std::size_t keep_bytes, std::source_location where) const {
  if (CUresult r = driver().cuMemPoolTrimTo(pool_, keep_bytes); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPoolTrimTo", pool_text(*this), where);
}

memory_pool memory_pool::create(context_ref ctx, memory_pool_options options, std::source_location where) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = ctx.device_ordinal();
  props.maxSize = options.max_size;
  memory_pool p;
  if (CUresult r = driver().cuMemPoolCreate(&p.pool_, &props); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemPoolCreate", "device " + std::to_string(ctx.device_ordinal()), where);
  p.ctx_ = ctx;
  if (options.release_threshold) p.set_release_threshold(options.release_threshold, where);
  return p;
}

memory_pool& memory_pool::operator=(memory_pool&& o) noexcept {
  if (this != &o) {
    this->~memory_pool();
    pool_ = std::exchange(o.pool_, nullptr);
    ctx_ = o.ctx_;
  }
  return *this;
}

memory_pool::~memory_pool() {
  if (!pool_) return;
  detail::release_nothrow_without_context(ctx_.get(), "cuMemPoolDestroy", pool_,
                                          [&](const auto& d) { return d.cuMemPoolDestroy(pool_); });
  pool_ = nullptr;
}

void pool_buffer::free_nothrow() noexcept {
  if (!ptr_) return;
  if (auto* d = detail::driver_if_loaded()) {
    const CUcontext ctx = stream_.context().get();
    const auto* handle = reinterpret_cast<const void*>(ptr_);
    trace::host_call hooked(trace::category::alloc, "cuMemFreeAsync", size_, trace::flag::stream_ordered);
    if (CUresult r = d->cuMemFreeAsync(ptr_, stream_.get()); r != CUDA_SUCCESS) {
      // Not freed in stream order: cuMemFree frees it once the stream is done with it.
      detail::defer_error(ctx, r, "cuMemFreeAsync", handle);
      (void)d->cuStreamSynchronize(stream_.get());
      detail::release_nothrow(ctx, "cuMemFree", handle,
                              [&](const detail::driver_entry_points& dd) { return dd.cuMemFree(ptr_); });
    }
  }
  ptr_ = 0;
  size_ = 0;
}

}  // namespace cuasync
