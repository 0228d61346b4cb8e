// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// compiler::preload: a disk entry put in the memory cache by its key alone, for warm starts. It claims nothing: a
// compile of the same key racing with it reads the entry too and the first result in memory wins (the two are the
// same bytes), so no caller ever waits on a preload or inherits its failure.
#include <cuasync/jit/compiler.hpp>

namespace cuasync::jit {

const char* to_string(preload_outcome o) noexcept {
  switch (o) {
    case preload_outcome::loaded: return "loaded";
    case preload_outcome::in_memory: return "in memory";
    case preload_outcome::busy: return "busy";
    case preload_outcome::not_on_disk: return "not on disk";
    case preload_outcome::rejected: return "rejected";
  }
  return "?";
}

preload_result compiler::preload(const cache_key& key) noexcept {
  preload_result out;
  out.result.key = key;
  try {
    {
      std::shared_lock lock(mutex_);
      if (auto it = memory_.find(key); it != memory_.end()) {
        out.outcome = preload_outcome::in_memory;
        out.result.program = it->second;
        out.result.outcome = cache_outcome::memory_hit;
        return out;
      }
      if (in_flight_.contains(key)) {
        out.outcome = preload_outcome::busy;
        return out;
      }
    }
    if (!disk_) return out;
    auto hit = disk_->load(key, &out.rejection);
    if (!hit) {
      out.outcome = out.rejection.empty() ? preload_outcome::not_on_disk : preload_outcome::rejected;
      return out;
    }
    auto program = std::make_shared<const compiled_program>(std::move(*hit));
    {
      std::unique_lock lock(mutex_);
      out.result.program = memory_.emplace(key, std::move(program)).first->second;
    }
    preloads_.fetch_add(1, std::memory_order_relaxed);
    out.outcome = preload_outcome::loaded;
    out.result.outcome = cache_outcome::disk_hit;
  } catch (...) {  // out of memory: as if there were no entry
    out = preload_result{};
    out.result.key = key;
  }
  return out;
}

}  // namespace cuasync::jit
