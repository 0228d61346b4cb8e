// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's entry points for memory (allocations, host memory, pools and stream-ordered
// allocation, memset, copies, pointer attributes).
#include "entry_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace sim::api {
namespace {

// ---- memory ----

// Stream-ordered allocation in a capture would make memory nodes, which the simulation lacks: refused, invalidating.
CUresult no_memory_nodes(stream_state* s) {
  if (!s || !s->capture) return CUDA_SUCCESS;
  invalidate(*s->capture);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult CUDAAPI MemAlloc(CUdeviceptr* out, size_t size) {
  ENTER(cuMemAlloc, oom);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  void* p = nullptr;
  if (CUresult r = allocate(d, kind::device_memory, size, c, nullptr, &p)) {
    if (r == oom)
      log_failure("cuMemAlloc_v2", ("cannot allocate " + std::to_string(size) + " bytes: " +
                                    std::to_string(d.device_memory - d.device_used[c->device]) + " bytes free")
                                       .c_str());
    return r;
  }
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemFree(CUdeviceptr p) {
  ENTER_DESTROY(cuMemFree, kind::device_memory);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  wait_all_done(d, lock);  // synchronous, as the driver's: no queued work uses it after
  return release(d, p, kind::device_memory, kind::managed);
}
CUresult CUDAAPI MemHostAlloc(void** out, size_t size, unsigned) {
  ENTER(cuMemHostAlloc, oom);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  return allocate(d, kind::pinned_host, size, c, nullptr, out);
}
CUresult CUDAAPI MemFreeHost(void* p) {
  ENTER_DESTROY(cuMemFreeHost, kind::pinned_host);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  wait_all_done(d, lock);  // synchronous, as the driver's: no queued work uses it after
  return release(d, reinterpret_cast<std::uintptr_t>(p), kind::pinned_host, kind::pinned_host);
}
CUresult CUDAAPI MemHostRegister(void* p, size_t size, unsigned) {
  ENTER(cuMemHostRegister, oom);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  if (!p || !size) return CUDA_ERROR_INVALID_VALUE;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  auto it = d.memory.lower_bound(start);
  if ((it != d.memory.end() && it->first < start + size) || find_memory(d, start))
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  d.memory[start] = allocation{kind::registered_host, size, c, nullptr, c->device};
  count(d, kind::registered_host, +1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemHostUnregister(void* p) {
  ENTER_DESTROY(cuMemHostUnregister, kind::registered_host);
  lock_t lock(d.m);
  wait_all_done(d, lock);  // synchronous, as the driver's: no queued work uses it after
  auto it = d.memory.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == d.memory.end() || it->second.k != kind::registered_host) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  d.memory.erase(it);
  count(d, kind::registered_host, -1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemHostGetDevicePointer(CUdeviceptr* out, void* p, unsigned) {
  ENTER(cuMemHostGetDevicePointer, unknown);
  lock_t lock(d.m);
  allocation* a = find_memory(d, reinterpret_cast<std::uintptr_t>(p));
  if (!a || (a->k != kind::pinned_host && a->k != kind::registered_host)) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemAllocManaged(CUdeviceptr* out, size_t size, unsigned) {
  ENTER(cuMemAllocManaged, oom);
  lock_t lock(d.m);
  if (CUresult u = unsafe_call(d)) return u;  // "potentially unsafe" during a capture
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  void* p = nullptr;
  if (CUresult r = allocate(d, kind::managed, size, c, nullptr, &p)) return r;
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult managed_range(device_model& d, CUdeviceptr p, size_t n) {
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, p, &base);
  if (!a || a->k != kind::managed || n > base + a->size - p) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemPrefetchAsync(CUdeviceptr p, size_t n, CUmemLocation, unsigned, CUstream hs) {
  ENTER(cuMemPrefetchAsync, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (CUresult m = managed_range(d, p, n)) return m;
  submit(d, s, [] {});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemAdvise(CUdeviceptr p, size_t n, CUmem_advise, CUmemLocation) {
  ENTER(cuMemAdvise, unknown);
  lock_t lock(d.m);
  return managed_range(d, p, n);
}
CUresult CUDAAPI MemGetInfo(size_t* free_bytes, size_t* total) {
  ENTER(cuMemGetInfo, unknown);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  *total = d.device_memory;
  *free_bytes = d.device_memory - d.device_used[c->device];
  return CUDA_SUCCESS;
}

// ---- stream-ordered memory ----

CUresult CUDAAPI MemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  ENTER(cuMemPoolCreate, oom);
  if (!props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = valid_device(props->location.id)) return r;
  lock_t lock(d.m);
  auto p = std::make_unique<pool_state>();
  p->device = props->location.id;
  return adopt(d, d.pools, kind::pool, std::move(p), out);
}
CUresult CUDAAPI MemPoolDestroy(CUmemoryPool h) {
  ENTER_DESTROY(cuMemPoolDestroy, kind::pool);
  lock_t lock(d.m);
  auto it = d.pools.find(h);
  if (it == d.pools.end() || it->second->is_default) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [addr, a] : d.memory)
    if (a.pool == it->second.get()) a.pool = nullptr;  // still-allocated memory outlives the pool's handle
  d.pools.erase(it);
  count(d, kind::pool, -1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemPoolSetAccess(CUmemoryPool h, const CUmemAccessDesc* desc, size_t n) {
  ENTER(cuMemPoolSetAccess, unknown);
  lock_t lock(d.m);
  if (!d.pools.count(h) || !desc || n == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || valid_device(desc[i].location.id))
      return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;  // the simulation has one address space: every device reaches every pool
}
CUresult CUDAAPI MemPoolSetAttribute(CUmemoryPool h, CUmemPool_attribute a, void* v) {
  ENTER(cuMemPoolSetAttribute, unknown);
  lock_t lock(d.m);
  if (!d.pools.count(h) || !v) return CUDA_ERROR_INVALID_VALUE;
  pool_state& p = *d.pools[h];
  switch (a) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p.release_threshold = *static_cast<cuuint64_t*>(v); break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: p.used_high = p.used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: break;
    default:
      if (static_cast<int>(a) < 16) p.attributes[a] = *static_cast<int*>(v);
      else return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemPoolGetAttribute(CUmemoryPool h, CUmemPool_attribute a, void* v) {
  ENTER(cuMemPoolGetAttribute, unknown);
  lock_t lock(d.m);
  if (!d.pools.count(h) || !v) return CUDA_ERROR_INVALID_VALUE;
  pool_state& p = *d.pools[h];
  switch (a) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *static_cast<cuuint64_t*>(v) = p.release_threshold; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *static_cast<cuuint64_t*>(v) = p.used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *static_cast<cuuint64_t*>(v) = p.used_high; break;
    default:
      if (static_cast<int>(a) < 16) *static_cast<int*>(v) = p.attributes[a];
      else return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemPoolTrimTo(CUmemoryPool h, size_t) {
  ENTER(cuMemPoolTrimTo, unknown);
  lock_t lock(d.m);
  return d.pools.count(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult alloc_async(device_model& d, CUdeviceptr* out, size_t size, pool_state* pool, CUstream hs) {
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (CUresult n = no_memory_nodes(s)) return n;
  context_state* c = context_of(s);
  if (CUresult u = usable(c)) return u;
  if (!pool) {
    for (auto& [h, p] : d.pools)
      if (p->is_default && p->device == c->device) pool = p.get();
    if (!pool) return CUDA_ERROR_NOT_SUPPORTED;  // cuasync asks for the default pool first
  }
  void* p = nullptr;
  if (CUresult a = allocate(d, kind::device_memory, size, c, pool, &p)) return a;
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemAllocFromPoolAsync(CUdeviceptr* out, size_t size, CUmemoryPool pool, CUstream s) {
  ENTER(cuMemAllocFromPoolAsync, oom);
  {
    lock_t lock(d.m);
    if (!d.pools.count(pool)) return CUDA_ERROR_INVALID_VALUE;
  }
  return alloc_async(d, out, size, reinterpret_cast<pool_state*>(pool), s);
}
CUresult CUDAAPI MemAllocAsync(CUdeviceptr* out, size_t size, CUstream s) {
  ENTER(cuMemAllocAsync, oom);
  return alloc_async(d, out, size, nullptr, s);
}
CUresult CUDAAPI MemFreeAsync(CUdeviceptr p, CUstream hs) {
  ENTER_DESTROY(cuMemFreeAsync, kind::device_memory);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (CUresult n = no_memory_nodes(s)) return n;
  auto it = d.memory.find(p);
  if (it == d.memory.end() || it->second.k != kind::device_memory) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [&d, p] {
    std::lock_guard l(d.m);
    release(d, p, kind::device_memory, kind::device_memory);
  });
  return CUDA_SUCCESS;
}
}  // namespace

std::function<void()> memset_work(CUdeviceptr dst, unsigned value, std::size_t n, std::size_t unit) {
  return [=] {
    if (unit == 1) {
      std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value), n);
    } else {
      auto* p = reinterpret_cast<std::uint32_t*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = value;
    }
  };
}

namespace {

CUresult memset_async(device_model& d, CUdeviceptr dst, unsigned value, size_t n, size_t unit, CUstream hs) {
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, dst, &base);
  if (!a || dst + n * unit > base + a->size || dst % unit) return CUDA_ERROR_INVALID_VALUE;
  node_params kept;
  if (s && s->capture)  // a node: what the node-update calls read and change (entry_graph_update.cpp)
    kept.memset = std::make_shared<const CUDA_MEMSET_NODE_PARAMS>(
        CUDA_MEMSET_NODE_PARAMS{dst, 0, value, static_cast<unsigned>(unit), n, 1});
  submit(d, s, memset_work(dst, value, n, unit), 0, {}, CU_GRAPH_NODE_TYPE_MEMSET, std::move(kept));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  ENTER(cuMemsetD8Async, unknown);
  return memset_async(d, dst, v, n, 1, s);
}
CUresult CUDAAPI MemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s) {
  ENTER(cuMemsetD32Async, unknown);
  return memset_async(d, dst, v, n, 4, s);
}
CUresult CUDAAPI MemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  ENTER(cuMemcpyAsync, unknown);
  lock_t lock(d.m);
  return copy(lock, dst, src, n, s);
}
CUresult CUDAAPI MemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n, CUstream s) {
  ENTER(cuMemcpyPeerAsync, unknown);
  lock_t lock(d.m);
  return copy(lock, dst, src, n, s);
}
CUresult CUDAAPI MemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  ENTER(cuMemcpyHtoDAsync, unknown);
  lock_t lock(d.m);
  allocation* a = find_memory(d, dst);
  if (!a || (a->k != kind::device_memory && a->k != kind::managed)) return CUDA_ERROR_INVALID_VALUE;
  return copy(lock, dst, reinterpret_cast<std::uintptr_t>(src), n, s);
}
CUresult CUDAAPI MemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  ENTER(cuMemcpyDtoHAsync, unknown);
  lock_t lock(d.m);
  allocation* a = find_memory(d, src);
  if (!a || (a->k != kind::device_memory && a->k != kind::managed)) return CUDA_ERROR_INVALID_VALUE;
  return copy(lock, reinterpret_cast<std::uintptr_t>(dst), src, n, s);
}
CUresult CUDAAPI PointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  ENTER(cuPointerGetAttribute, unknown);
  lock_t lock(d.m);
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, p, &base);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned*>(data) = a->k == kind::managed; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) =
          (a->k == kind::pinned_host || a->k == kind::registered_host) ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(a->ctx); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = a->device; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *static_cast<void**>(data) = reinterpret_cast<void*>(p); break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = a->size; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI PointerGetAttributes(unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) {
  ENTER(cuPointerGetAttributes, unknown);
  {
    lock_t lock(d.m);
    if (!find_memory(d, p)) {  // unknown memory: default values and success, as the driver does
      for (unsigned i = 0; i < n; ++i)
        if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED || attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
          *static_cast<unsigned*>(data[i]) = 0;
        else
          return CUDA_ERROR_NOT_SUPPORTED;
      return CUDA_SUCCESS;
    }
  }
  for (unsigned i = 0; i < n; ++i)
    if (CUresult r = PointerGetAttribute(data[i], attrs[i], p); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}

}  // namespace

std::span<const entry> memory_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuMemAlloc, MemAlloc),
      CUASYNC_SIM_ENTRY(cuMemFree, MemFree),
      CUASYNC_SIM_ENTRY(cuMemHostAlloc, MemHostAlloc),
      CUASYNC_SIM_ENTRY(cuMemFreeHost, MemFreeHost),
      CUASYNC_SIM_ENTRY(cuMemHostRegister, MemHostRegister),
      CUASYNC_SIM_ENTRY(cuMemHostUnregister, MemHostUnregister),
      CUASYNC_SIM_ENTRY(cuMemHostGetDevicePointer, MemHostGetDevicePointer),
      CUASYNC_SIM_ENTRY(cuMemAllocManaged, MemAllocManaged),
      CUASYNC_SIM_ENTRY(cuMemPrefetchAsync, MemPrefetchAsync),
      CUASYNC_SIM_ENTRY(cuMemAdvise, MemAdvise),
      CUASYNC_SIM_ENTRY(cuMemGetInfo, MemGetInfo),
      CUASYNC_SIM_ENTRY(cuMemPoolCreate, MemPoolCreate),
      CUASYNC_SIM_ENTRY(cuMemPoolDestroy, MemPoolDestroy),
      CUASYNC_SIM_ENTRY(cuMemPoolSetAttribute, MemPoolSetAttribute),
      CUASYNC_SIM_ENTRY(cuMemPoolGetAttribute, MemPoolGetAttribute),
      CUASYNC_SIM_ENTRY(cuMemPoolTrimTo, MemPoolTrimTo),
      CUASYNC_SIM_ENTRY(cuMemPoolSetAccess, MemPoolSetAccess),
      CUASYNC_SIM_ENTRY(cuMemAllocFromPoolAsync, MemAllocFromPoolAsync),
      CUASYNC_SIM_ENTRY(cuMemAllocAsync, MemAllocAsync),
      CUASYNC_SIM_ENTRY(cuMemFreeAsync, MemFreeAsync),
      CUASYNC_SIM_ENTRY(cuMemsetD8Async, MemsetD8Async),
      CUASYNC_SIM_ENTRY(cuMemsetD32Async, MemsetD32Async),
      CUASYNC_SIM_ENTRY(cuMemcpyAsync, MemcpyAsync),
      CUASYNC_SIM_ENTRY(cuMemcpyPeerAsync, MemcpyPeerAsync),
      CUASYNC_SIM_ENTRY(cuMemcpyHtoDAsync, MemcpyHtoDAsync),
      CUASYNC_SIM_ENTRY(cuMemcpyDtoHAsync, MemcpyDtoHAsync),
      CUASYNC_SIM_ENTRY(cuPointerGetAttribute, PointerGetAttribute),
      CUASYNC_SIM_ENTRY(cuPointerGetAttributes, PointerGetAttributes),
  };
  return table;
}

}  // namespace sim::api
