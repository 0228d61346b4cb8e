// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A launch with the instrumentation on: the kernel's GPU span on its stream's lane, flagged when its grid alone
// fills every SM at the kernel's occupancy (nothing of another stream can run beside it).
#include <cuasync/driver/detail/flight_hooks.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/launch.hpp>

#include <map>
#include <mutex>
#include <tuple>

namespace cuasync::detail {
namespace {

// Blocks of `f` one SM holds at this block size and shared memory; 0 when the driver cannot say. Cached: asked once
// per kernel and shape while tracing.
int blocks_per_sm_cached(context_ref ctx, CUfunction f, int block_threads, std::size_t shared_bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<CUfunction, int, std::size_t>, int> cache;
  std::lock_guard lock(mutex);
  const auto key = std::tuple(f, block_threads, shared_bytes);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  int blocks = 0;
  try {
    scoped_context guard(ctx);  // the occupancy calculator asks for a current context
    if (driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, block_threads, shared_bytes) != CUDA_SUCCESS)
      return 0;  // not cached: asked again next time
  } catch (...) {
    return 0;
  }
  cache.emplace(key, blocks);
  return blocks;
}

// The same, the thread's last answer first: a loop launching one kernel takes no lock. A function handle is not
// reused while its module is loaded, and a launch of it holds the module.
int blocks_per_sm(context_ref ctx, CUfunction f, int block_threads, std::size_t shared_bytes) {
  struct last_answer {
    CUfunction f = nullptr;
    int block_threads = 0;
    std::size_t shared_bytes = 0;
    int blocks = 0;
  };
  thread_local last_answer last;
  if (last.f == f && last.block_threads == block_threads && last.shared_bytes == shared_bytes) return last.blocks;
  const int blocks = blocks_per_sm_cached(ctx, f, block_threads, shared_bytes);
  if (blocks > 0) last = {f, block_threads, shared_bytes, blocks};
  return blocks;
}

}  // namespace

void launch_instrumented(std::uint32_t hooks, stream_ref s, const kernel_info& k, const launch_config& c,
                         void** params, std::source_location where) {
  if (hooks & trace::hook::flight) {  // the flight recorder's own path (flight_hooks.cpp), alone or with the rest
    if (hooks == trace::hook::flight) return launch_flown(s, k, c, params, where);  // the C ABI's JIT launch comes here
    const trace::flight::mark m = flight_note_launch(s, k, c, where);
    try {
      launch_instrumented(hooks & ~trace::hook::flight, s, k, c, params, where);
    } catch (const std::system_error& e) {
      trace::flight::set_status(m, trace::flight::status::failed, e.code().value());
      throw;
    }
    return trace::flight::set_status(m, trace::flight::status::enqueued);
  }
  gpu_op op;
  op.category = trace::category::launch;
  op.lane = trace::lane_kind::stream;
  op.call = "cuLaunchKernelEx";
  op.name = k.name;
  if (hooks & trace::hook::record) {
    const int per_sm = blocks_per_sm(k.ctx, k.function, static_cast<int>(c.block.volume()), c.shared_memory_bytes);
    if (per_sm > 0 && k.device &&
        c.grid.volume() >= static_cast<unsigned long long>(per_sm) * unsigned(k.device->multiprocessor_count))
      op.flags |= trace::flag::fills_device;
  }
  instrumented_op instrumented(hooks, s, std::move(op));
  launch_unhooked(s, k, c, params, where);
  instrumented.enqueued();
}

}  // namespace cuasync::detail
