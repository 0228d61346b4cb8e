#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <unistd.h>

namespace cuasync::jit {

const char* to_string(cache_outcome o) noexcept {
  switch (o) {
    case cache_outcome::memory_hit: return "memory hit";
    case cache_outcome::disk_hit: return "disk hit";
    case cache_outcome::miss: return "miss";
  }
  return "?";
}

compiler::compiler(const disk_cache_settings& settings) {
  if (settings.enabled) disk_.emplace(settings.directory, settings.max_bytes);
}

const std::string& compiler::pch_directory() {
  std::call_once(pch_once_, [this] {
    std::filesystem::path dir = disk_ ? disk_->directory() / "pch"
                                      : std::filesystem::temp_directory_path() /
                                            ("cuasync-" + std::to_string(::geteuid()) + "-pch");
    detail::secure_directory(dir, "precompiled header directory");
    pch_dir_ = dir.string();
  });
  return pch_dir_;
}

compile_result compiler::compile(const program& p, int compute_capability, const compile_options& o,
                                 output_request request) {
  return compile(p, select_target(compute_capability, request), o);
}

compile_result compiler::compile(const program& p, const target& t, const compile_options& o) {
  const cache_key key = make_cache_key(p, t, o, nvrtc_library().version());
  std::shared_future<std::shared_ptr<const compiled_program>> pending;
  std::promise<std::shared_ptr<const compiled_program>> promise;
  {
    std::shared_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) [[likely]] {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return {it->second, cache_outcome::memory_hit, key};
    }
  }
  {
    std::unique_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return {it->second, cache_outcome::memory_hit, key};
    }
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      pending = it->second;
    } else {
      in_flight_.emplace(key, promise.get_future().share());
    }
  }
  if (pending.valid()) {  // another thread of this process is compiling it: wait for that one
    auto result = pending.get();
    memory_hits_.fetch_add(1, std::memory_order_relaxed);
    return {std::move(result), cache_outcome::memory_hit, key};
  }

  auto finish = [&](std::shared_ptr<const compiled_program> result) {
    std::unique_lock lock(mutex_);
    memory_.emplace(key, result);
    in_flight_.erase(key);
    promise.set_value(result);
  };
  try {
    if (disk_) {
      if (auto hit = disk_->load(key)) {
        auto result = std::make_shared<const compiled_program>(std::move(*hit));
        finish(result);
        return {std::move(result), cache_outcome::disk_hit, key};
      }
    }
    const std::string pch = o.precompiled_headers ? pch_directory() : std::string();
    auto result = std::make_shared<const compiled_program>(jit::compile(p, t, o, pch));
    compiles_.fetch_add(1, std::memory_order_relaxed);
    if (disk_) {
      try {
        disk_->store(key, *result);
      } catch (const cache_error&) {
        // Counted in store_failures: the cache is an optimisation, the compile succeeded.
      }
    }
    finish(result);
    return {std::move(result), cache_outcome::miss, key};
  } catch (...) {
    {
      std::unique_lock lock(mutex_);
      in_flight_.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

compiler_stats compiler::stats() const noexcept {
  compiler_stats s;
  s.memory_hits = memory_hits_.load();
  s.compiles = compiles_.load();
  if (disk_) s.disk = disk_->stats();
  return s;
}

void compiler::clear_memory() {
  std::unique_lock lock(mutex_);
  memory_.clear();
}

compiler& default_compiler() {
  static compiler instance;
  return instance;
}

}  // namespace cuasync::jit
