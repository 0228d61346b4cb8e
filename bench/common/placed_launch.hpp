// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// cuasync::launch with an admission place per launch (try_admit), the places given back per 16 when the event after
// the last of them completes: the C++ reference for the C ABI's launches without a completion, as they were before
// its per-stream admission credit (bench/plugins/c_abi_bench.cpp, tests/callgrind/launch_loop.cpp's cpp_placed).
#include <cuasync/driver/launch.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include <stdexcept>
#include <vector>

namespace cuasync::bench {

struct places_back final : completion_callback {
  std::vector<admission_ticket> places;
  void complete(std::error_code) noexcept override { delete this; }
};

//! One launch of `k` (no arguments) on `s`, its place kept in `batch` (reserve 16) until 16 have gathered.
inline void placed_launch(stream_ref s, kernel_ref k, const admission_site& site, std::vector<admission_ticket>& batch,
                          const launch_config& config) {
  cuda_completion_source& source = cuda_completion_source::instance();
  admission_ticket t = source.try_admit(site);
  if (!t) throw std::runtime_error("placed_launch: no admission place (keep at most 32 in flight)");
  launch(s, k, config);
  batch.push_back(std::move(t));
  if (batch.size() < 16) return;
  admission_ticket last = std::move(batch.back());
  batch.pop_back();
  auto* c = new places_back;
  c->places = std::move(batch);
  batch.clear();
  completion_callbacks::instance().wait(source.record(s, std::move(last)).into_target(), c);
}

}  // namespace cuasync::bench
