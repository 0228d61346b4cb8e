// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's entry points for errors and versions, devices, peer access and contexts.
#include "entry_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace sim::api {
namespace {

// ---- errors and versions ----

const char* error_name(CUresult e) {
  switch (e) {
#define NAME(c) \
  case c: return #c;
    NAME(CUDA_SUCCESS) NAME(CUDA_ERROR_INVALID_VALUE) NAME(CUDA_ERROR_OUT_OF_MEMORY) NAME(CUDA_ERROR_NOT_INITIALIZED)
    NAME(CUDA_ERROR_DEINITIALIZED) NAME(CUDA_ERROR_STUB_LIBRARY) NAME(CUDA_ERROR_NO_DEVICE)
    NAME(CUDA_ERROR_INVALID_DEVICE) NAME(CUDA_ERROR_INVALID_IMAGE) NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_NO_BINARY_FOR_GPU) NAME(CUDA_ERROR_INVALID_PTX) NAME(CUDA_ERROR_INVALID_HANDLE)
    NAME(CUDA_ERROR_NOT_FOUND) NAME(CUDA_ERROR_NOT_READY) NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) NAME(CUDA_ERROR_LAUNCH_FAILED) NAME(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    NAME(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) NAME(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    NAME(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) NAME(CUDA_ERROR_NOT_SUPPORTED) NAME(CUDA_ERROR_UNKNOWN)
#undef NAME
    default: return nullptr;
  }
}

CUresult CUDAAPI GetErrorName(CUresult e, const char** s) {
  *s = error_name(e);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI GetErrorString(CUresult e, const char** s) {
  *s = error_name(e) ? "error reported by the simulated driver" : nullptr;
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI Init(unsigned) { return model().device_count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE; }
CUresult CUDAAPI DriverGetVersion(int* v) {
  // FAKE_CUDA_DRIVER_VERSION=12090 makes it a CUDA 12.9 driver (the PTX it can JIT follows): another driver for the
  // JIT cache's tests. At least 12.4, which cuasync needs.
  static const int version = [] {
    const char* e = std::getenv("FAKE_CUDA_DRIVER_VERSION");
    return e && std::atoi(e) >= 12040 ? std::atoi(e) : 13000;
  }();
  *v = version;
  return CUDA_SUCCESS;
}

// ---- devices ----


CUresult CUDAAPI DeviceGet(CUdevice* out, int ordinal) {
  ENTER(cuDeviceGet, unknown);
  if (ordinal < 0 || ordinal >= d.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *out = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetCount(int* n) {
  ENTER(cuDeviceGetCount, unknown);
  *n = d.device_count;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetName(char* name, int len, CUdevice dev) {
  ENTER(cuDeviceGetName, unknown);
  if (CUresult r = valid_device(dev)) return r;
  std::snprintf(name, static_cast<std::size_t>(len), "cuasync simulated device %d", dev);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  ENTER(cuDeviceGetUuid, unknown);
  if (CUresult r = valid_device(dev)) return r;
  std::memset(uuid->bytes, 0, sizeof uuid->bytes);
  uuid->bytes[15] = static_cast<char>(dev + 1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceTotalMem(size_t* bytes, CUdevice dev) {
  ENTER(cuDeviceTotalMem, unknown);
  if (CUresult r = valid_device(dev)) return r;
  *bytes = d.device_memory;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice dev) {
  ENTER(cuDeviceGetAttribute, unknown);
  if (CUresult r = valid_device(dev)) return r;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = d.compute_capability / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = d.compute_capability % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 4; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 2; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 48 << 10; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 227 << 10; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: *v = 1; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  ENTER(cuDeviceGetPCIBusId, unknown);
  if (CUresult r = valid_device(dev)) return r;
  std::snprintf(bus, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x10 + dev);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceGetDefaultMemPool(CUmemoryPool* out, CUdevice dev) {
  ENTER(cuDeviceGetDefaultMemPool, unknown);
  if (CUresult r = valid_device(dev)) return r;
  lock_t lock(d.m);
  for (auto& [h, p] : d.pools)
    if (p->is_default && p->device == dev) {
      *out = static_cast<CUmemoryPool>(h);
      return CUDA_SUCCESS;
    }
  auto p = std::make_unique<pool_state>();
  p->device = dev;
  p->is_default = true;
  *out = reinterpret_cast<CUmemoryPool>(p.get());
  d.pools[p.get()] = std::move(p);  // the driver's own: not counted
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  ENTER(cuDeviceCanAccessPeer, unknown);
  if (valid_device(dev) || valid_device(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  ENTER(cuCtxEnablePeerAccess, unknown);
  lock_t lock(d.m);
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = usable(current_context())) return r;
  if (!d.contexts.count(peer)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

// ---- contexts ----

// A context that goes takes its streams, events, modules and memory with it (as the driver does).
void destroy_context_objects(device_model& d, context_state* c) {
  auto drop = [&](auto& objects, kind k) {
    for (auto it = objects.begin(); it != objects.end();)
      if (it->second->ctx == c) {
        it = objects.erase(it);
        count(d, k, -1);
      } else {
        ++it;
      }
  };
  drop(d.streams, kind::stream);
  drop(d.events, kind::event);
  drop(d.modules, kind::module);
  for (auto& [h, l] : d.libraries) l->per_context.erase(c);
  for (auto it = d.memory.begin(); it != d.memory.end();) {
    auto next = std::next(it);
    if (it->second.ctx == c) release(d, it->first, it->second.k, it->second.k);
    it = next;
  }
}

context_state* new_context(device_model& d, int dev, bool primary) {
  auto c = std::make_unique<context_state>();
  c->device = dev;
  c->primary = primary;
  c->id = d.next_id++;
  context_state* raw = c.get();
  d.contexts[raw] = std::move(c);
  return raw;
}

CUresult CUDAAPI DevicePrimaryCtxRetain(CUcontext* out, CUdevice dev) {
  ENTER(cuDevicePrimaryCtxRetain, oom);
  if (CUresult r = valid_device(dev)) return r;
  lock_t lock(d.m);
  context_state*& c = d.primary[dev];
  if (!c) c = new_context(d, dev, true);
  if (c->primary_refs++ == 0) {
    c->alive = true;
    c->sticky = CUDA_SUCCESS;
    c->id = d.next_id++;
    count(d, kind::context, +1);
  }
  *out = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI DevicePrimaryCtxRelease(CUdevice dev) {
  ENTER_DESTROY(cuDevicePrimaryCtxRelease, kind::context);
  if (CUresult r = valid_device(dev)) return r;
  lock_t lock(d.m);
  context_state* c = d.primary[dev];
  if (!c || c->primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--c->primary_refs == 0) {
    c->alive = false;
    count(d, kind::context, -1);
    wait_all_done(d, lock);
    destroy_context_objects(d, c);
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxGetCurrent(CUcontext* out) {
  ENTER(cuCtxGetCurrent, unknown);
  *out = reinterpret_cast<CUcontext>(current_context());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxSetCurrent(CUcontext c) {
  ENTER(cuCtxSetCurrent, unknown);
  lock_t lock(d.m);
  if (c && !d.contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;
  set_current_context(reinterpret_cast<context_state*>(c));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxPushCurrent(CUcontext c) {
  ENTER(cuCtxPushCurrent, unknown);
  lock_t lock(d.m);
  if (!c || !d.contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;
  push_context(reinterpret_cast<context_state*>(c));
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxPopCurrent(CUcontext* out) {
  ENTER(cuCtxPopCurrent, unknown);
  if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
  context_state* c = pop_context();
  if (out) *out = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxGetDevice(CUdevice* dev) {
  ENTER(cuCtxGetDevice, unknown);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->device;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxSynchronize() {
  const CUresult injected = sim::enter("cuCtxSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  context_state* c = current_context();
  if (injected) return make_sticky(c, injected), injected;
  if (CUresult r = usable(c)) return r;
  wait_all_done(d, lock);
  return c->sticky;
}
CUresult CUDAAPI CtxGetStreamPriorityRange(int* least, int* greatest) {
  ENTER(cuCtxGetStreamPriorityRange, unknown);
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxGetId(CUcontext c, unsigned long long* id) {
  ENTER(cuCtxGetId, unknown);
  lock_t lock(d.m);
  auto* s = c ? reinterpret_cast<context_state*>(c) : current_context();
  if (!s || !d.contexts.count(s)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!s->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *id = s->id;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxCreate(CUcontext* out, unsigned, CUdevice dev) {
  ENTER(cuCtxCreate, oom);
  if (CUresult r = valid_device(dev)) return r;
  lock_t lock(d.m);
  context_state* c = new_context(d, dev, false);
  count(d, kind::context, +1);
  push_context(c);
  *out = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI CtxDestroy(CUcontext c) {
  ENTER_DESTROY(cuCtxDestroy, kind::context);
  lock_t lock(d.m);
  auto it = d.contexts.find(c);
  if (it == d.contexts.end() || it->second->primary || !it->second->alive) return CUDA_ERROR_INVALID_CONTEXT;
  it->second->alive = false;  // the state stays: handles to it answer CONTEXT_IS_DESTROYED
  count(d, kind::context, -1);
  wait_all_done(d, lock);
  destroy_context_objects(d, it->second.get());
  if (current_context() == it->second.get()) pop_context();
  return CUDA_SUCCESS;
}

}  // namespace

std::span<const entry> context_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuGetErrorName, GetErrorName),
      CUASYNC_SIM_ENTRY(cuGetErrorString, GetErrorString),
      CUASYNC_SIM_ENTRY(cuInit, Init),
      CUASYNC_SIM_ENTRY(cuDriverGetVersion, DriverGetVersion),
      CUASYNC_SIM_ENTRY(cuDeviceGet, DeviceGet),
      CUASYNC_SIM_ENTRY(cuDeviceGetCount, DeviceGetCount),
      CUASYNC_SIM_ENTRY(cuDeviceGetName, DeviceGetName),
      CUASYNC_SIM_ENTRY(cuDeviceGetUuid, DeviceGetUuid),
      CUASYNC_SIM_ENTRY(cuDeviceTotalMem, DeviceTotalMem),
      CUASYNC_SIM_ENTRY(cuDeviceGetAttribute, DeviceGetAttribute),
      CUASYNC_SIM_ENTRY(cuDeviceGetPCIBusId, DeviceGetPCIBusId),
      CUASYNC_SIM_ENTRY(cuDeviceGetDefaultMemPool, DeviceGetDefaultMemPool),
      CUASYNC_SIM_ENTRY(cuDeviceCanAccessPeer, DeviceCanAccessPeer),
      CUASYNC_SIM_ENTRY(cuCtxEnablePeerAccess, CtxEnablePeerAccess),
      CUASYNC_SIM_ENTRY(cuDevicePrimaryCtxRetain, DevicePrimaryCtxRetain),
      CUASYNC_SIM_ENTRY(cuDevicePrimaryCtxRelease, DevicePrimaryCtxRelease),
      CUASYNC_SIM_ENTRY(cuCtxGetCurrent, CtxGetCurrent),
      CUASYNC_SIM_ENTRY(cuCtxSetCurrent, CtxSetCurrent),
      CUASYNC_SIM_ENTRY(cuCtxPushCurrent, CtxPushCurrent),
      CUASYNC_SIM_ENTRY(cuCtxPopCurrent, CtxPopCurrent),
      CUASYNC_SIM_ENTRY(cuCtxGetDevice, CtxGetDevice),
      CUASYNC_SIM_ENTRY(cuCtxSynchronize, CtxSynchronize),
      CUASYNC_SIM_ENTRY(cuCtxGetStreamPriorityRange, CtxGetStreamPriorityRange),
      CUASYNC_SIM_ENTRY(cuCtxGetId, CtxGetId),
      CUASYNC_SIM_ENTRY(cuCtxCreate, CtxCreate),
      CUASYNC_SIM_ENTRY(cuCtxDestroy, CtxDestroy),
  };
  return table;
}

}  // namespace sim::api
