// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The driver's side of the flight recorder: rings opened with the stream's device, id and context and a probe for
// the watch thread, and a launch recorded with its shape.
#include <cuasync/driver/detail/flight_hooks.hpp>

#include <cuasync/driver/detail/driver_api.hpp>

#include <algorithm>

namespace cuasync::detail {
namespace {

// Asked from the flight recorder's watch thread, never an io thread: whether the stream still has work. A stream
// being captured into a graph runs nothing now (its operations become the graph's): idle. The thread runs in
// relaxed capture mode, so that its query never invalidates another thread's global-mode capture.
int probe_stream(void* handle) {
  static thread_local bool relaxed = [] {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return driver().cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
  }();
  (void)relaxed;
  auto s = static_cast<CUstream>(handle);
  // The stream's context current on this thread (cuasync's own): a stream or context gone since runs nothing.
  CUcontext ctx = nullptr, current = nullptr;
  if (s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
    if (driver().cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS || !ctx) return 0;
    if ((driver().cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != ctx) &&
        driver().cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
      return 0;
  }
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver().cuStreamIsCapturing(s, &capture) == CUDA_SUCCESS && capture != CU_STREAM_CAPTURE_STATUS_NONE) return 0;
  const CUresult r = driver().cuStreamQuery(s);
  if (r == CUDA_SUCCESS) return 0;
  // No context current for a default stream (which names none): it cannot be asked; taken as busy.
  if (r == CUDA_ERROR_NOT_READY || r == CUDA_ERROR_INVALID_CONTEXT) return 1;
  return static_cast<int>(r);
}

}  // namespace

trace::flight::ring* flight_ring(stream_ref s) noexcept {
  trace::flight::stream_identity id;
  id.probe = probe_stream;
  try {
    id.context = reinterpret_cast<std::uintptr_t>(s.context().get());
    id.device = s.context().device_ordinal();
    unsigned long long sid = 0;
    if (s.get() != CU_STREAM_LEGACY && s.get() != CU_STREAM_PER_THREAD &&
        driver().cuStreamGetId(s.get(), &sid) == CUDA_SUCCESS)
      id.stream_id = sid;
  } catch (...) {
    // What could not be read stays unknown; the operations are still recorded.
  }
  return trace::flight::open_ring(s.get(), id);
}

trace::flight::mark flight_note_launch(stream_ref s, const kernel_info& k, const launch_config& c,
                                       std::source_location where) noexcept {
  trace::flight::ring* r = flight_ring_of(s);
  if (!r) [[unlikely]] return {};
  trace::flight::launch_record l;
  l.call = "cuLaunchKernelEx";
  // The name interned at the kernel's first noted launch (a racing first launch interns the same pointer).
  l.stable_name = k.flight_name.load(std::memory_order_acquire);
  if (!l.stable_name) [[unlikely]] {
    l.stable_name = trace::flight::intern_name(k.name);
    k.flight_name.store(l.stable_name, std::memory_order_release);
  }
  const std::uint32_t grid[3] = {c.grid.x, c.grid.y, c.grid.z}, block[3] = {c.block.x, c.block.y, c.block.z};
  trace::flight::launch_shape(grid, block, c.shared_memory_bytes, static_cast<std::uint32_t>(k.params.size()),
                              k.flight_param_sizes, l.shape);  // the sizes packed when the kernel was described
  l.where = where;
  return trace::flight::note_launch(r, l);
}

void launch_flown(stream_ref s, const kernel_info& k, const launch_config& c, void** params,
                  std::source_location where) {
  const trace::flight::mark m = flight_note_launch(s, k, c, where);
  try {
    launch_unhooked(s, k, c, params, where);
  } catch (const std::system_error& e) {
    trace::flight::set_status(m, trace::flight::status::failed, e.code().value());
    throw;
  }
  trace::flight::set_status(m, trace::flight::status::enqueued);
}

}  // namespace cuasync::detail
