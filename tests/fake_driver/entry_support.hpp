// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to the simulated driver: what its entry points share (entry_*.cpp): the ENTER macros that count calls
// and inject failures, objects' maps and live counts, memory and stream-ordered copies, and the table fragment type
// each file hands to cuGetProcAddress (entry_points.cpp).
#include "control.h"
#include "simulated_device.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace sim::api {

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

using lock_t = std::unique_lock<std::mutex>;

// Where a copy's end lies: device memory, memory the driver knows on the host, or pageable memory it does not know.
enum class place { device, known_host, pageable };

// CUDA_ERROR_INVALID_DEVICE unless `dev` is a simulated device.
CUresult valid_device(int dev);
// Counts a destroy call the driver refused (an injected failure).
void refuse(kind k);
// A context calls may use: alive, without a sticky error.
CUresult usable(const context_state* c);
// The context of `s` (the current one for a default stream).
context_state* context_of(stream_state* s);
// The live count of objects of kind `k`.
void count(device_model& d, kind k, long n);
std::size_t round_up(std::size_t n, std::size_t a);
// Memory for an allocation; the map of allocations knows its size and kind.
CUresult allocate(device_model& d, kind k, std::size_t size, context_state* c, pool_state* pool, void** out);

// Frees an allocation of kind `k1` or `k2`.
CUresult release(device_model& d, std::uintptr_t p, kind k1, kind k2);
place where(device_model& d, std::uintptr_t p, std::size_t n, CUresult* r);

// A copy in stream order: a pageable source is read now (the driver stages it before returning), a pageable
// destination is written before returning (the call is synchronous then), everything else when its turn comes.
CUresult copy(lock_t& lock, std::uintptr_t dst, std::uintptr_t src, std::size_t n, CUstream hs);

// Kernels and memsets, shared by launches and the node-update calls (entry_graph_update.cpp); lock held.
// A function whose module (or library) is still loaded (nullptr otherwise).
function_state* find_function(device_model& d, CUfunction f);
// The argument bytes of a launch of `f` from its kernelParams or extra; false when neither gives them.
bool pack_arguments(const function_state& f, void** params, void** extra, std::vector<unsigned char>& args);
// CUDA_ERROR_INVALID_VALUE for a grid, block or dynamic shared memory `f` cannot be launched with.
CUresult check_launch_shape(const function_state& f, const unsigned grid[3], const unsigned block[3],
                            unsigned shared);
// The work of a launch of `fn` with `args` in context `c` (a fault there is sticky).
std::function<void()> kernel_work(device_model& d, context_state* c, const function_state& f,
                                  std::vector<unsigned char> args);
// The work of a memset of `n` elements of `unit` (1 or 4) bytes at `dst`.
std::function<void()> memset_work(CUdeviceptr dst, unsigned value, std::size_t n, std::size_t unit);

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

// One entry point: its name and the function handed out for it.
struct entry {
  const char* name;
  void* fn;
};
#define CUASYNC_SIM_ENTRY(name, fn) {#name, reinterpret_cast<void*>(&fn)}

// Each file's fragment of the table.
std::span<const entry> context_entries();
std::span<const entry> stream_entries();
std::span<const entry> memory_entries();
std::span<const entry> module_entries();
std::span<const entry> log_entries();
std::span<const entry> capture_entries();
std::span<const entry> conditional_entries();
std::span<const entry> graph_update_entries();
// cuStreamGetCaptureInfo at the ABI of `cuda_version`: _v3 from 12.3, _v2 before.
void* capture_info_entry(int cuda_version);

}  // namespace sim::api
