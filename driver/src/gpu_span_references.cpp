// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU span collector's references (gpu_span_state.hpp): made on the collector's idle stream, retired once no
// span in flight is measured against them.
#include "gpu_span_state.hpp"

#include <cuasync/driver/detail/driver_api.hpp>

#include <thread>

namespace cuasync::detail {

std::shared_ptr<reference> new_reference(context_state& c) {
  auto r = std::make_shared<reference>();
  const auto& d = driver();
  if (d.cuEventCreate(&r->event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  if (d.cuEventRecord(r->event, c.idle) != CUDA_SUCCESS) {
    d.cuEventDestroy(r->event);
    return nullptr;
  }
  CUresult q;
  while ((q = d.cuEventQuery(r->event)) == CUDA_ERROR_NOT_READY) std::this_thread::yield();
  const std::int64_t seen = trace::now_ns();
  if (q != CUDA_SUCCESS) {
    d.cuEventDestroy(r->event);
    return nullptr;
  }
  r->map.add_sample(seen, 0);
  r->created_ns = seen;
  return r;
}

void retire_references(context_state& c) {
  auto& refs = c.references;
  for (std::size_t i = 0; i + 1 < refs.size();)
    if (refs[i].use_count() == 1) {
      driver().cuEventDestroy(refs[i]->event);
      refs.erase(refs.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
}

}  // namespace cuasync::detail
