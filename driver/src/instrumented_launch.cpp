// A launch with the instrumentation on: the kernel's GPU span on its stream's lane, flagged when its grid alone
// fills every SM at the kernel's occupancy (nothing of another stream can run beside it: seed §17).
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/launch.hpp>

#include <map>
#include <mutex>
#include <tuple>

namespace cuasync::detail {
namespace {

// Blocks of `f` one SM holds at this block size and shared memory; 0 when the driver cannot say. Cached: asked once
// per kernel and shape while tracing.
int blocks_per_sm(context_ref ctx, CUfunction f, int block_threads, std::size_t shared_bytes) {
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

}  // namespace

void launch_instrumented(std::uint32_t hooks, stream_ref s, const kernel_info& k, const launch_config& c,
                         void** params, std::source_location where) {
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
