// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The kernels the simulated driver runs (any other kernel does nothing): enough for a test to see that arguments
// arrive, that work runs in stream order, and what a faulting kernel does to its context.
//   sim_fill_u32(u32* p, u32 n, u32 value)   p[i] = value
//   sim_add_u32(u32* p, u32 n, u32 value)    p[i] += value
//   sim_sleep_ms(u32 ms)                     takes that long
//   sim_wait_u32(u32* flag)                  a gate: waits until *flag != 0, holding only its own stream (and what
//                                            waits on it), as a spinning kernel does on a GPU
//   sim_trap()                               CUDA_ERROR_LAUNCH_FAILED (sticky, like __trap())
//   sim_illegal_address()                    CUDA_ERROR_ILLEGAL_ADDRESS (sticky)
//   cuasync_replay_bump(u64* word)           *word += 1, as the replay anchor's PTX kernel does (engine/src/replay_bump.cpp)
#include "simulated_device.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace sim {

namespace {
template <class T>
T arg(const function_state& f, const std::vector<unsigned char>& args, std::size_t i) {
  T v{};
  if (i < f.params.size() && f.params[i].offset + sizeof(T) <= args.size())
    std::memcpy(&v, args.data() + f.params[i].offset, sizeof(T));
  return v;
}
}  // namespace

CUresult run_kernel(const function_state& f, const std::vector<unsigned char>& args) {
  if (f.name == "sim_fill_u32" || f.name == "sim_add_u32") {
    auto* p = reinterpret_cast<std::uint32_t*>(arg<std::uint64_t>(f, args, 0));
    const auto n = arg<std::uint32_t>(f, args, 1), value = arg<std::uint32_t>(f, args, 2);
    std::uintptr_t base = 0;
    {
      std::lock_guard lock(model().m);
      allocation* a = find_memory(model(), reinterpret_cast<std::uintptr_t>(p), &base);
      if (n && (!a || std::uintptr_t{n} * 4 > base + a->size - reinterpret_cast<std::uintptr_t>(p)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    for (std::uint32_t i = 0; i < n; ++i) p[i] = f.name == "sim_fill_u32" ? value : p[i] + value;
  } else if (f.name == "sim_sleep_ms") {
    std::this_thread::sleep_for(std::chrono::milliseconds(arg<std::uint32_t>(f, args, 0)));
  } else if (f.name == "sim_wait_u32") {
    std::lock_guard lock(model().m);
    const auto p = arg<std::uint64_t>(f, args, 0);
    std::uintptr_t base = 0;
    allocation* a = find_memory(model(), p, &base);
    if (!a || p + 4 > base + a->size) return CUDA_ERROR_ILLEGAL_ADDRESS;
  } else if (f.name == "cuasync_replay_bump") {
    const auto p = arg<std::uint64_t>(f, args, 0);
    {
      std::lock_guard lock(model().m);
      std::uintptr_t base = 0;
      allocation* a = find_memory(model(), p, &base);
      if (!a || p + 8 > base + a->size || p % 8) return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    std::atomic_ref<std::uint64_t> word(*reinterpret_cast<std::uint64_t*>(p));  // one writer: load, add, store
    word.store(word.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  } else if (f.name == "sim_trap") {
    return CUDA_ERROR_LAUNCH_FAILED;
  } else if (f.name == "sim_illegal_address") {
    return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  return CUDA_SUCCESS;
}

std::function<bool()> kernel_gate(const function_state& f, const std::vector<unsigned char>& args) {
  if (f.name != "sim_wait_u32") return {};
  // Asked with the model's lock held. A flag outside any allocation opens the gate, and the kernel then faults.
  return [p = arg<std::uint64_t>(f, args, 0)] {
    std::uintptr_t base = 0;
    allocation* a = find_memory(model(), p, &base);
    return !a || p + 4 > base + a->size || __atomic_load_n(reinterpret_cast<const std::uint32_t*>(p), __ATOMIC_ACQUIRE);
  };
}

}  // namespace sim
