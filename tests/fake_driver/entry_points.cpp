// The Driver API entry points of the simulated driver, handed out by cuGetProcAddress_v2 (the only symbol cuasync's
// loader looks up), each at the ABI of the version cuasync requests (driver/detail/driver_api.hpp).
#include "control.h"
#include "simulated_device.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

using namespace sim;

namespace {

constexpr CUresult oom = CUDA_ERROR_OUT_OF_MEMORY, unknown = CUDA_ERROR_UNKNOWN,
                   no_resources = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;

#define ENTER(name, injected)                                                              \
  if (CUresult enter_r = sim::enter(#name, injected); enter_r != CUDA_SUCCESS) return enter_r; \
  [[maybe_unused]] device_model& d = model()
// For a call that destroys an object of kind `k`: an injected failure leaves the object alive, which is then the
// driver's refusal, not the caller's leak.
#define ENTER_DESTROY(name, k)                                                  \
  if (CUresult enter_r = sim::enter(#name, unknown); enter_r != CUDA_SUCCESS) { \
    refuse(k);                                                                  \
    return enter_r;                                                             \
  }                                                                             \
  [[maybe_unused]] device_model& d = model()

void refuse(kind k) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  ++d.refused[static_cast<int>(k)];
}

using lock_t = std::unique_lock<std::mutex>;

CUresult usable(const context_state* c) {
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return c->sticky;
}

// The context of `s` (the current one for a default stream).
context_state* context_of(stream_state* s) { return s ? s->ctx : current_context(); }

void count(device_model& d, kind k, long n) { d.live[static_cast<int>(k)] += n; }

// A created object joins its map (keyed by the handle given out) and the live count of its kind.
template <class Handle, class State>
CUresult adopt(device_model& d, std::map<void*, std::unique_ptr<State>>& map, kind k, std::unique_ptr<State> s,
               Handle* out) {
  *out = reinterpret_cast<Handle>(s.get());
  map[s.get()] = std::move(s);
  count(d, k, +1);
  return CUDA_SUCCESS;
}
// A destroyed object leaves both.
template <class State>
CUresult forget(device_model& d, std::map<void*, std::unique_ptr<State>>& map, kind k, void* handle) {
  if (!map.erase(handle)) return CUDA_ERROR_INVALID_HANDLE;
  count(d, k, -1);
  return CUDA_SUCCESS;
}

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Memory for an allocation; the map of allocations knows its size and kind.
CUresult allocate(device_model& d, kind k, std::size_t size, context_state* c, pool_state* pool, void** out) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const int dev = c ? c->device : 0;
  const bool on_device = k == kind::device_memory || k == kind::managed;
  if (on_device && d.device_used[dev] + size > d.device_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = std::aligned_alloc(256, round_up(size, 256));
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  if (on_device) d.device_used[dev] += size;
  d.memory[reinterpret_cast<std::uintptr_t>(p)] = allocation{k, size, c, pool, dev};
  if (pool) pool->used_high = std::max(pool->used_high, pool->used += size);
  count(d, k, +1);
  *out = p;
  return CUDA_SUCCESS;
}

CUresult release(device_model& d, std::uintptr_t p, kind k1, kind k2) {
  auto it = d.memory.find(p);
  if (it == d.memory.end() || (it->second.k != k1 && it->second.k != k2)) return CUDA_ERROR_INVALID_VALUE;
  const allocation a = it->second;
  if (a.k == kind::device_memory || a.k == kind::managed) d.device_used[a.device] -= a.size;
  if (a.pool) a.pool->used -= a.size;
  if (a.k != kind::registered_host) std::free(reinterpret_cast<void*>(p));
  d.memory.erase(it);
  count(d, a.k, -1);
  return CUDA_SUCCESS;
}

// Where a copy's end lies: device memory, memory the driver knows on the host, or pageable memory it does not know.
enum class place { device, known_host, pageable };
place where(device_model& d, std::uintptr_t p, std::size_t n, CUresult* r) {
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, p, &base);
  if (!a) return place::pageable;
  if (p + n > base + a->size) *r = CUDA_ERROR_INVALID_VALUE;
  return (a->k == kind::pinned_host || a->k == kind::registered_host) ? place::known_host : place::device;
}

// A copy in stream order: a pageable source is read now (the driver stages it before returning), a pageable
// destination is written before returning (the call is synchronous then), everything else when its turn comes.
CUresult copy(lock_t& lock, std::uintptr_t dst, std::uintptr_t src, std::size_t n, CUstream hs) {
  device_model& d = model();
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r != CUDA_SUCCESS) return r;
  if (CUresult u = usable(context_of(s)); u != CUDA_SUCCESS) return u;
  const place to = where(d, dst, n, &r), from = where(d, src, n, &r);
  if (r != CUDA_SUCCESS) return r;
  std::uint64_t seq = 0;
  if (from == place::pageable) {
    auto staged = std::make_shared<std::vector<unsigned char>>(reinterpret_cast<const unsigned char*>(src),
                                                               reinterpret_cast<const unsigned char*>(src) + n);
    seq = submit(d, s, [=] { std::memcpy(reinterpret_cast<void*>(dst), staged->data(), n); });
  } else {
    seq = submit(d, s, [=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n); });
  }
  if (to == place::pageable) wait_done(d, lock, seq);
  return CUDA_SUCCESS;
}

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
  *v = 13000;
  return CUDA_SUCCESS;
}

// ---- devices ----

CUresult valid_device(int dev) { return dev >= 0 && dev < model().device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

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
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
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
    wait_done(d, lock, d.submitted);
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
  wait_done(d, lock, d.submitted);
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
  wait_done(d, lock, d.submitted);
  destroy_context_objects(d, it->second.get());
  if (current_context() == it->second.get()) pop_context();
  return CUDA_SUCCESS;
}

// ---- streams ----

CUresult CUDAAPI StreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  ENTER(cuStreamCreateWithPriority, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  auto s = std::make_unique<stream_state>();
  s->ctx = c;
  s->flags = flags;
  s->priority = std::max(-5, std::min(0, priority));
  s->id = d.next_id++;
  return adopt(d, d.streams, kind::stream, std::move(s), out);
}
CUresult CUDAAPI StreamDestroy(CUstream s) {
  ENTER_DESTROY(cuStreamDestroy, kind::stream);
  lock_t lock(d.m);
  return forget(d, d.streams, kind::stream, s);  // queued work still runs (it holds no stream)
}
CUresult CUDAAPI StreamWaitEvent(CUstream hs, CUevent e, unsigned) {
  ENTER(cuStreamWaitEvent, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (!d.events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  (void)s;  // one queue in submission order: the event's work is already ahead of anything queued from now on
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamQuery(CUstream hs) {
  const CUresult injected = sim::enter("cuStreamQuery", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (injected) return make_sticky(context_of(s), injected), injected;
  if (r) return r;
  return (s ? s->last : d.submitted) <= d.done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI StreamSynchronize(CUstream hs) {
  const CUresult injected = sim::enter("cuStreamSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (injected) return make_sticky(context_of(s), injected), injected;
  if (r) return r;
  context_state* c = context_of(s);
  wait_done(d, lock, s ? s->last : d.submitted);
  return c ? c->sticky : CUDA_SUCCESS;
}
CUresult CUDAAPI LaunchHostFunc(CUstream hs, CUhostFn fn, void* user) {
  ENTER(cuLaunchHostFunc, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [fn, user] { fn(user); });
  return CUDA_SUCCESS;
}
template <class F>
CUresult with_stream(device_model& d, CUstream hs, F f) {
  lock_t lock(d.m);
  auto it = d.streams.find(hs);
  if (it == d.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  f(*it->second);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamGetPriority(CUstream hs, int* p) {
  ENTER(cuStreamGetPriority, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *p = s.priority; });
}
CUresult CUDAAPI StreamGetFlags(CUstream hs, unsigned* f) {
  ENTER(cuStreamGetFlags, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *f = s.flags; });
}
CUresult CUDAAPI StreamGetCtx(CUstream hs, CUcontext* c) {
  ENTER(cuStreamGetCtx, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *c = reinterpret_cast<CUcontext>(s.ctx); });
}
CUresult CUDAAPI StreamGetId(CUstream hs, unsigned long long* id) {
  ENTER(cuStreamGetId, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *id = s.id; });
}
// Graphs are not simulated (below), so no stream is ever being captured; the capture mode is kept per thread.
CUresult CUDAAPI StreamIsCapturing(CUstream hs, CUstreamCaptureStatus* status) {
  ENTER(cuStreamIsCapturing, unknown);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  return with_stream(d, hs, [&](stream_state&) { *status = CU_STREAM_CAPTURE_STATUS_NONE; });
}
thread_local CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
CUresult CUDAAPI ThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  ENTER(cuThreadExchangeStreamCaptureMode, unknown);
  if (!mode || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, thread_capture_mode);
  return CUDA_SUCCESS;
}
template <class T>
CUresult write_value(device_model& d, CUstream hs, CUdeviceptr addr, T value) {
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, addr, &base);
  if (!a || addr + sizeof(T) > base + a->size || addr % sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [addr, value] { __atomic_store_n(reinterpret_cast<T*>(addr), value, __ATOMIC_RELEASE); });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned) {
  ENTER(cuStreamWriteValue64, unknown);
  return write_value<cuuint64_t>(d, s, addr, v);
}
CUresult CUDAAPI StreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned) {
  ENTER(cuStreamWriteValue32, unknown);
  return write_value<cuuint32_t>(d, s, addr, v);
}

// ---- events ----

CUresult CUDAAPI EventCreate(CUevent* out, unsigned flags) {
  ENTER(cuEventCreate, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  auto e = std::make_unique<event_state>();
  e->ctx = c;
  e->flags = flags;
  return adopt(d, d.events, kind::event, std::move(e), out);
}
CUresult CUDAAPI EventDestroy(CUevent e) {
  ENTER_DESTROY(cuEventDestroy, kind::event);
  lock_t lock(d.m);
  return forget(d, d.events, kind::event, e);
}
CUresult CUDAAPI EventRecord(CUevent he, CUstream hs) {
  ENTER(cuEventRecord, unknown);
  lock_t lock(d.m);
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  event_state* e = it->second.get();
  const std::uint64_t seq = d.submitted + 1;
  e->seq = submit(d, s, [&d, he, seq] {
    std::lock_guard l(d.m);
    auto found = d.events.find(he);
    if (found != d.events.end() && found->second->seq == seq) found->second->at_ms = now_ms();
  });
  return CUDA_SUCCESS;
}
CUresult event_status(device_model& d, CUevent he, event_state** out) {
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second.get();
  if (CUresult r = usable((*out)->ctx)) return r;
  return (*out)->seq <= d.done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI EventQuery(CUevent he) {
  const CUresult injected = sim::enter("cuEventQuery", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  if (auto it = d.events.find(he); injected && it != d.events.end()) make_sticky(it->second->ctx, injected);
  if (injected) return injected;
  event_state* e = nullptr;
  return event_status(d, he, &e);
}
CUresult CUDAAPI EventSynchronize(CUevent he) {
  const CUresult injected = sim::enter("cuEventSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (injected) return make_sticky(it->second->ctx, injected), injected;
  wait_done(d, lock, it->second->seq);
  event_state* e = nullptr;
  return event_status(d, he, &e);
}
CUresult CUDAAPI EventElapsedTime(float* ms, CUevent a, CUevent b) {
  ENTER(cuEventElapsedTime, unknown);
  lock_t lock(d.m);
  event_state *ea = nullptr, *eb = nullptr;
  if (CUresult r = event_status(d, a, &ea)) return r;
  if (CUresult r = event_status(d, b, &eb)) return r;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->seq || !eb->seq) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(eb->at_ms - ea->at_ms);
  return CUDA_SUCCESS;
}

// ---- memory ----

CUresult CUDAAPI MemAlloc(CUdeviceptr* out, size_t size) {
  ENTER(cuMemAlloc, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  void* p = nullptr;
  if (CUresult r = allocate(d, kind::device_memory, size, c, nullptr, &p)) return r;
  *out = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI MemFree(CUdeviceptr p) {
  ENTER_DESTROY(cuMemFree, kind::device_memory);
  lock_t lock(d.m);
  wait_done(d, lock, d.submitted);  // synchronous, as the driver's: no queued work uses it after
  return release(d, p, kind::device_memory, kind::managed);
}
CUresult CUDAAPI MemHostAlloc(void** out, size_t size, unsigned) {
  ENTER(cuMemHostAlloc, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  return allocate(d, kind::pinned_host, size, c, nullptr, out);
}
CUresult CUDAAPI MemFreeHost(void* p) {
  ENTER_DESTROY(cuMemFreeHost, kind::pinned_host);
  lock_t lock(d.m);
  wait_done(d, lock, d.submitted);  // synchronous, as the driver's: no queued work uses it after
  return release(d, reinterpret_cast<std::uintptr_t>(p), kind::pinned_host, kind::pinned_host);
}
CUresult CUDAAPI MemHostRegister(void* p, size_t size, unsigned) {
  ENTER(cuMemHostRegister, oom);
  lock_t lock(d.m);
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
  wait_done(d, lock, d.submitted);  // synchronous, as the driver's: no queued work uses it after
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
  if (!a || a->k != kind::managed || p + n > base + a->size) return CUDA_ERROR_INVALID_VALUE;
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
  auto it = d.memory.find(p);
  if (it == d.memory.end() || it->second.k != kind::device_memory) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [&d, p] {
    std::lock_guard l(d.m);
    release(d, p, kind::device_memory, kind::device_memory);
  });
  return CUDA_SUCCESS;
}
CUresult memset_async(device_model& d, CUdeviceptr dst, unsigned value, size_t n, size_t unit, CUstream hs) {
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, dst, &base);
  if (!a || dst + n * unit > base + a->size || dst % unit) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [=] {
    if (unit == 1) {
      std::memset(reinterpret_cast<void*>(dst), static_cast<int>(value), n);
    } else {
      auto* p = reinterpret_cast<std::uint32_t*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = value;
    }
  });
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

// ---- modules and launches ----

CUresult CUDAAPI ModuleLoadDataEx(CUmodule* out, const void* image, unsigned n, CUjit_option* options, void** values) {
  ENTER(cuModuleLoadDataEx, CUDA_ERROR_INVALID_PTX);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  for (unsigned i = 0; i < n; ++i)  // empty logs
    if ((options[i] == CU_JIT_INFO_LOG_BUFFER || options[i] == CU_JIT_ERROR_LOG_BUFFER) && values[i])
      *static_cast<char*>(values[i]) = 0;
  const auto* bytes = static_cast<const unsigned char*>(image);
  if (bytes[0] == 0x7f || bytes[0] == 0x50)  // ELF or fatbin: no machine code runs here
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  auto m = std::make_unique<module_state>();
  m->ctx = c;
  if (!parse_ptx(static_cast<const char*>(image), *m)) return CUDA_ERROR_INVALID_PTX;
  return adopt(d, d.modules, kind::module, std::move(m), out);
}
CUresult CUDAAPI ModuleUnload(CUmodule m) {
  ENTER_DESTROY(cuModuleUnload, kind::module);
  lock_t lock(d.m);
  return forget(d, d.modules, kind::module, m);
}
CUresult CUDAAPI ModuleGetFunction(CUfunction* out, CUmodule hm, const char* name) {
  ENTER(cuModuleGetFunction, unknown);
  lock_t lock(d.m);
  auto it = d.modules.find(hm);
  if (it == d.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto f = it->second->functions.find(name);
  if (f == it->second->functions.end()) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUfunction>(f->second.get());
  return CUDA_SUCCESS;
}
// A function whose module is still loaded (nullptr otherwise). Lock held.
function_state* find_function(device_model& d, CUfunction f) {
  auto* fs = reinterpret_cast<function_state*>(f);
  for (auto& [h, m] : d.modules)
    for (auto& [name, fn] : m->functions)
      if (fn.get() == fs) return fs;
  return nullptr;
}
CUresult CUDAAPI FuncGetAttribute(int* v, CUfunction_attribute a, CUfunction hf) {
  ENTER(cuFuncGetAttribute, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 16; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dynamic_shared; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI FuncSetAttribute(CUfunction hf, CUfunction_attribute a, int v) {
  ENTER(cuFuncSetAttribute, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_SUCCESS;
  if (v < 0 || v > (227 << 10)) return CUDA_ERROR_INVALID_VALUE;
  f->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI FuncGetParamInfo(CUfunction hf, size_t i, size_t* offset, size_t* size) {
  ENTER(cuFuncGetParamInfo, unknown);
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (i >= f->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->params[i].offset;
  if (size) *size = f->params[i].size;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction hf, int block, size_t) {
  ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor, unknown);
  lock_t lock(d.m);
  if (!find_function(d, hf)) return CUDA_ERROR_INVALID_HANDLE;
  if (block <= 0 || block > 1024) return CUDA_ERROR_INVALID_VALUE;
  *n = std::min(32, 2048 / block);
  return CUDA_SUCCESS;
}
CUresult launch(device_model& d, CUfunction hf, const unsigned grid[3], const unsigned block[3], unsigned shared,
                CUstream hs, void** params, void** extra) {
  lock_t lock(d.m);
  function_state* f = find_function(d, hf);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  context_state* c = context_of(s);
  if (CUresult u = usable(c)) return u;
  if (c != f->module->ctx) return CUDA_ERROR_INVALID_HANDLE;  // a function of another context
  if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2]) return CUDA_ERROR_INVALID_VALUE;
  if (std::uint64_t(block[0]) * block[1] * block[2] > 1024 || block[2] > 64) return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(std::max(48 << 10, f->max_dynamic_shared))) return CUDA_ERROR_INVALID_VALUE;
  std::vector<unsigned char> args;
  if (params) {
    for (std::size_t i = 0; i < f->params.size(); ++i) {
      args.resize(f->params[i].offset + f->params[i].size);
      std::memcpy(args.data() + f->params[i].offset, params[i], f->params[i].size);
    }
  } else if (extra) {
    void* buffer = nullptr;
    std::size_t size = 0;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = e[1];
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(e[1]);
    }
    if (!buffer) return CUDA_ERROR_INVALID_VALUE;
    args.assign(static_cast<unsigned char*>(buffer), static_cast<unsigned char*>(buffer) + size);
  } else if (!f->params.empty()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const function_state fn = *f;  // the module may be unloaded before the work runs (the driver keeps it)
  submit(d, s, [&d, c, fn, args = std::move(args)] {
    if (CUresult e = run_kernel(fn, args)) {
      std::lock_guard l(d.m);
      if (c->sticky == CUDA_SUCCESS) c->sticky = e;
    }
  });
  return CUDA_SUCCESS;
}
CUresult CUDAAPI LaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  ENTER(cuLaunchKernel, no_resources);
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(d, f, grid, block, shared, s, params, extra);
}
CUresult CUDAAPI LaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  ENTER(cuLaunchKernelEx, no_resources);
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return launch(d, f, grid, block, config->sharedMemBytes, config->hStream, params, extra);
}

// Graphs are not simulated: cuasync's graph code answers the driver's "not supported" as it would any error.
CUresult CUDAAPI NotSupported() { return CUDA_ERROR_NOT_SUPPORTED; }

struct entry {
  const char* name;
  void* fn;
};
#define E(name, fn) {#name, reinterpret_cast<void*>(&fn)}
const entry entries[] = {
    E(cuGetErrorName, GetErrorName), E(cuGetErrorString, GetErrorString), E(cuInit, Init),
    E(cuDriverGetVersion, DriverGetVersion), E(cuDeviceGet, DeviceGet), E(cuDeviceGetCount, DeviceGetCount),
    E(cuDeviceGetName, DeviceGetName), E(cuDeviceGetUuid, DeviceGetUuid), E(cuDeviceTotalMem, DeviceTotalMem),
    E(cuDeviceGetAttribute, DeviceGetAttribute), E(cuDeviceGetPCIBusId, DeviceGetPCIBusId),
    E(cuDeviceGetDefaultMemPool, DeviceGetDefaultMemPool), E(cuDeviceCanAccessPeer, DeviceCanAccessPeer),
    E(cuCtxEnablePeerAccess, CtxEnablePeerAccess), E(cuDevicePrimaryCtxRetain, DevicePrimaryCtxRetain),
    E(cuDevicePrimaryCtxRelease, DevicePrimaryCtxRelease), E(cuCtxGetCurrent, CtxGetCurrent),
    E(cuCtxSetCurrent, CtxSetCurrent), E(cuCtxPushCurrent, CtxPushCurrent), E(cuCtxPopCurrent, CtxPopCurrent),
    E(cuCtxGetDevice, CtxGetDevice), E(cuCtxSynchronize, CtxSynchronize),
    E(cuCtxGetStreamPriorityRange, CtxGetStreamPriorityRange), E(cuCtxGetId, CtxGetId), E(cuCtxCreate, CtxCreate),
    E(cuCtxDestroy, CtxDestroy), E(cuStreamCreateWithPriority, StreamCreateWithPriority),
    E(cuStreamDestroy, StreamDestroy), E(cuStreamWaitEvent, StreamWaitEvent), E(cuStreamQuery, StreamQuery),
    E(cuStreamSynchronize, StreamSynchronize), E(cuLaunchHostFunc, LaunchHostFunc),
    E(cuStreamGetPriority, StreamGetPriority), E(cuStreamGetFlags, StreamGetFlags), E(cuStreamGetCtx, StreamGetCtx),
    E(cuStreamGetId, StreamGetId), E(cuStreamIsCapturing, StreamIsCapturing),
    E(cuThreadExchangeStreamCaptureMode, ThreadExchangeStreamCaptureMode), E(cuStreamWriteValue64, StreamWriteValue64),
    E(cuStreamWriteValue32, StreamWriteValue32), E(cuEventCreate, EventCreate), E(cuEventDestroy, EventDestroy),
    E(cuEventRecord, EventRecord), E(cuEventQuery, EventQuery), E(cuEventSynchronize, EventSynchronize),
    E(cuEventElapsedTime, EventElapsedTime), E(cuMemAlloc, MemAlloc), E(cuMemFree, MemFree),
    E(cuMemHostAlloc, MemHostAlloc), E(cuMemFreeHost, MemFreeHost), E(cuMemHostRegister, MemHostRegister),
    E(cuMemHostUnregister, MemHostUnregister), E(cuMemHostGetDevicePointer, MemHostGetDevicePointer),
    E(cuMemAllocManaged, MemAllocManaged), E(cuMemPrefetchAsync, MemPrefetchAsync), E(cuMemAdvise, MemAdvise),
    E(cuMemGetInfo, MemGetInfo), E(cuMemPoolCreate, MemPoolCreate), E(cuMemPoolDestroy, MemPoolDestroy),
    E(cuMemPoolSetAttribute, MemPoolSetAttribute), E(cuMemPoolGetAttribute, MemPoolGetAttribute),
    E(cuMemPoolTrimTo, MemPoolTrimTo), E(cuMemPoolSetAccess, MemPoolSetAccess), E(cuMemAllocFromPoolAsync, MemAllocFromPoolAsync),
    E(cuMemAllocAsync, MemAllocAsync), E(cuMemFreeAsync, MemFreeAsync), E(cuMemsetD8Async, MemsetD8Async),
    E(cuMemsetD32Async, MemsetD32Async), E(cuMemcpyAsync, MemcpyAsync), E(cuMemcpyPeerAsync, MemcpyPeerAsync),
    E(cuMemcpyHtoDAsync, MemcpyHtoDAsync), E(cuMemcpyDtoHAsync, MemcpyDtoHAsync),
    E(cuPointerGetAttribute, PointerGetAttribute), E(cuPointerGetAttributes, PointerGetAttributes), E(cuModuleLoadDataEx, ModuleLoadDataEx),
    E(cuModuleUnload, ModuleUnload), E(cuModuleGetFunction, ModuleGetFunction),
    E(cuFuncGetAttribute, FuncGetAttribute), E(cuFuncSetAttribute, FuncSetAttribute),
    E(cuFuncGetParamInfo, FuncGetParamInfo),
    E(cuOccupancyMaxActiveBlocksPerMultiprocessor, OccupancyMaxActiveBlocksPerMultiprocessor),
    E(cuLaunchKernelEx, LaunchKernelEx), E(cuLaunchKernel, LaunchKernel),
};
#undef E
const char* const unsupported[] = {"cuStreamBeginCapture", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                                   "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
                                   "cuGraphExecKernelNodeSetParams", "cuGraphGetNodes", "cuGraphNodeGetType",
                                   "cuGraphKernelNodeGetParams",
                                   // IPC needs a second process and a real driver; the simulation has neither.
                                   "cuIpcGetMemHandle", "cuIpcOpenMemHandle", "cuIpcCloseMemHandle",
                                   "cuIpcGetEventHandle", "cuIpcOpenEventHandle",
                                   // Nor is virtual memory management (its attributes read 0: no VMM, no fd handles).
                                   "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease",
                                   "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
                                   "cuMemSetAccess", "cuMemExportToShareableHandle",
                                   "cuMemImportFromShareableHandle"};

}  // namespace

extern "C" CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                                CUdriverProcAddressQueryResult* status) {
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  for (const entry& e : entries)
    if (!std::strcmp(symbol, e.name)) {
      *pfn = e.fn;
      return CUDA_SUCCESS;
    }
  for (const char* u : unsupported)
    if (!std::strcmp(symbol, u)) {
      *pfn = reinterpret_cast<void*>(&NotSupported);
      return CUDA_SUCCESS;
    }
  *pfn = nullptr;
  *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

// ---- control (control.h) ----

extern "C" void fake_cuda_set_phase(int phase) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  d.phase = phase < 0 ? 0 : phase > 1 ? 2 : phase;  // phase 2: every round after the first
}

extern "C" void fake_cuda_drain(void) {
  device_model& d = model();
  std::unique_lock lock(d.m);
  wait_done(d, lock, d.submitted);
}

extern "C" int fake_cuda_report(char* out, int size) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  std::string s = "injected=" + d.inject.entry + ":" + std::to_string(d.inject.nth) +
                  " fired=" + (d.inject.fired ? "1" : "0") + "\nlive";
  for (int k = 0; k < kinds; ++k) s += std::string(" ") + kind_names[k] + "=" + std::to_string(d.live[k]);
  s += "\nrefused";
  for (int k = 0; k < kinds; ++k) s += std::string(" ") + kind_names[k] + "=" + std::to_string(d.refused[k]);
  s += "\ncalls";
  for (auto& [name, n] : d.calls[1]) s += " " + name + "=" + std::to_string(n);
  s += "\n";
  if (out && size > 0) std::snprintf(out, static_cast<std::size_t>(size), "%s", s.c_str());
  return static_cast<int>(s.size()) + 1;
}
