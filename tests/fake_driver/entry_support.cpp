// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's shared helpers (entry_support.hpp).
#include "entry_support.hpp"

#include <cstring>
#include <vector>

namespace sim::api {

void refuse(kind k) {
  device_model& d = model();
  std::lock_guard lock(d.m);
  ++d.refused[static_cast<int>(k)];
}

CUresult usable(const context_state* c) {
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  return c->sticky;
}

// The context of `s` (the current one for a default stream).
context_state* context_of(stream_state* s) { return s ? s->ctx : current_context(); }

void count(device_model& d, kind k, long n) { d.live[static_cast<int>(k)] += n; }

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Memory for an allocation; the map of allocations knows its size and kind.
CUresult allocate(device_model& d, kind k, std::size_t size, context_state* c, pool_state* pool, void** out) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const int dev = c ? c->device : 0;
  const bool on_device = k == kind::device_memory || k == kind::managed;
  if (on_device && size > d.device_memory - d.device_used[dev]) return CUDA_ERROR_OUT_OF_MEMORY;
  if (size > (std::size_t{1} << 48)) return CUDA_ERROR_OUT_OF_MEMORY;  // round_up would wrap; no host has it
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

place where(device_model& d, std::uintptr_t p, std::size_t n, CUresult* r) {
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, p, &base);
  if (!a) return place::pageable;
  if (n > base + a->size - p) *r = CUDA_ERROR_INVALID_VALUE;  // p is inside: no overflow for a huge n
  return (a->k == kind::pinned_host || a->k == kind::registered_host) ? place::known_host : place::device;
}

// A copy in stream order: a pageable source is read now (the driver stages it before returning), a pageable
// destination is written before returning (the call is synchronous then), everything else when its turn comes.
// On a capturing stream only copies between device and known host memory are captured (memcpy nodes); a pageable
// end is refused, invalidating the capture (a graph replays no staging).
CUresult copy(lock_t& lock, std::uintptr_t dst, std::uintptr_t src, std::size_t n, CUstream hs) {
  device_model& d = model();
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r != CUDA_SUCCESS) return r;
  if (CUresult u = usable(context_of(s)); u != CUDA_SUCCESS) return u;
  const place to = where(d, dst, n, &r), from = where(d, src, n, &r);
  if (r != CUDA_SUCCESS) return r;
  if (s && s->capture && (from == place::pageable || to == place::pageable)) {  // no staging in a graph
    invalidate(*s->capture);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  std::uint64_t seq = 0;
  if (from == place::pageable) {
    auto staged = std::make_shared<std::vector<unsigned char>>(reinterpret_cast<const unsigned char*>(src),
                                                               reinterpret_cast<const unsigned char*>(src) + n);
    seq = submit(d, s, [=] { std::memcpy(reinterpret_cast<void*>(dst), staged->data(), n); });
  } else {
    seq = submit(
        d, s, [=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n); }, 0, {},
        CU_GRAPH_NODE_TYPE_MEMCPY);
  }
  if (to == place::pageable) wait_done(d, lock, seq);
  return CUDA_SUCCESS;
}

CUresult valid_device(int dev) {
  return dev >= 0 && dev < model().device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace sim::api
