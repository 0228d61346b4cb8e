// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the vector a front-end's pass collects its completions in, reused per thread. It is taken out while in
// use, so a completion that runs a nested pass on the same thread (poll_once from inside a handler) gets its own.
#include <cuasync/engine/completion_queues.hpp>

#include <vector>

namespace cuasync::detail {

class pass_scratch {
 public:
  pass_scratch() : v_(std::move(slot())) { v_.clear(); }
  ~pass_scratch() {
    v_.clear();
    if (v_.capacity() > slot().capacity()) slot() = std::move(v_);
  }
  pass_scratch(const pass_scratch&) = delete;
  pass_scratch& operator=(const pass_scratch&) = delete;
  std::vector<completed_wait>& get() noexcept { return v_; }

 private:
  static std::vector<completed_wait>& slot() noexcept {
    thread_local std::vector<completed_wait> v;
    return v;
  }
  std::vector<completed_wait> v_;
};

}  // namespace cuasync::detail
