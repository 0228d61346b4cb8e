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
//   sim_set_conditional(u64 handle, u32 v)   cudaGraphSetConditional(handle, v) (entry_conditional.cpp)
//   sim_collatz_start(u32* x, u32* steps, u32 x0, u64 handle)
//                                            *x = x0, *steps = 0, the handle's value x0 != 1
//   sim_collatz_step(u32* x, u32* steps, u64 handle)
//                                            one step of the Collatz sequence at *x (halve it when even, else 3x+1),
//                                            ++*steps, the handle's value *x != 1: a while node's body that runs as
//                                            many times as x0 needs steps to reach 1
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
// A u32 the kernel may touch: inside an allocation.
bool valid_u32(std::uint64_t p) {
  std::lock_guard lock(model().m);
  std::uintptr_t base = 0;
  allocation* a = find_memory(model(), p, &base);
  return a && p + 4 <= base + a->size;
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
  } else if (f.name == "sim_set_conditional") {
    return set_conditional(arg<std::uint64_t>(f, args, 0), arg<std::uint32_t>(f, args, 1));
  } else if (f.name == "sim_collatz_start" || f.name == "sim_collatz_step") {
    const bool start = f.name == "sim_collatz_start";
    const auto x = arg<std::uint64_t>(f, args, 0), steps = arg<std::uint64_t>(f, args, 1);
    if (!valid_u32(x) || !valid_u32(steps)) return CUDA_ERROR_ILLEGAL_ADDRESS;
    auto* px = reinterpret_cast<std::uint32_t*>(x);
    auto* ps = reinterpret_cast<std::uint32_t*>(steps);
    if (start) {
      *px = arg<std::uint32_t>(f, args, 2);
      *ps = 0;
    } else {
      *px = *px % 2 ? 3 * *px + 1 : *px / 2;
      ++*ps;
    }
    return set_conditional(arg<std::uint64_t>(f, args, start ? 3 : 2), *px != 1);
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
