#include <cuasync/jit/compiler.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/scope.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/nvrtc_identity.hpp>

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

compiler::compiler(const disk_cache_settings& settings, std::source_location where) {
  if (settings.enabled) disk_.emplace(settings.directory, settings.max_bytes, where);
}

const std::string& compiler::pch_directory(std::source_location where) {
  std::call_once(pch_once_, [this, where] {
    std::filesystem::path dir = disk_ ? disk_->directory() / "pch"
                                      : std::filesystem::temp_directory_path() /
                                            ("cuasync-" + std::to_string(::geteuid()) + "-pch");
    detail::secure_directory(dir, "precompiled header directory", where);
    pch_dir_ = dir.string();
  });
  return pch_dir_;
}

const nvrtc_info& compiler::nvrtc_identity() {
  if (const nvrtc_info* known = identity_.load(std::memory_order_acquire)) [[likely]] return *known;
  if (const nvrtc_info* loaded = detail::loaded_nvrtc_info()) {
    identity_.store(loaded, std::memory_order_release);
    record_identity();
    return *loaded;
  }
  if (disk_) {
    std::call_once(recorded_once_, [this] { recorded_ = recorded_nvrtc_identity(disk_->directory()); });
    if (recorded_) {
      // Another thread may have loaded NVRTC meanwhile and published it: keep that one.
      const nvrtc_info* expected = nullptr;
      identity_.compare_exchange_strong(expected, &*recorded_, std::memory_order_acq_rel);
      return *identity_.load(std::memory_order_acquire);
    }
  }
  const nvrtc_info& loaded = nvrtc_library();  // no usable record: load NVRTC, as a miss would
  identity_.store(&loaded, std::memory_order_release);
  record_identity();
  return loaded;
}

target compiler::target_for(int compute_capability, output_request request, std::source_location where) {
  return select_target(compute_capability, nvrtc_identity().supported_archs, request, where);
}

void compiler::record_identity() noexcept {
  if (!disk_) return;
  std::call_once(record_once_, [this] {
    try {
      // No caller's location: a failure is never reported.
      if (record_nvrtc_identity(disk_->directory(), std::source_location{}))
        identity_records_.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception&) {
      // The record is an optimisation: without it a later process loads NVRTC, as it did before records existed.
    }
  });
}

namespace {
// A compile as a host span: jit_compile when NVRTC ran, jit_cache_hit when a cache answered (the outcome named).
template <class Compile>
compile_result traced(const program& p, Compile&& compile) {
  if (!trace::enabled()) [[likely]] return compile();
  const std::int64_t begin = trace::now_ns();
  compile_result r = compile();
  trace::span s;
  s.lane = trace::this_thread_lane();
  s.category = r.outcome == cache_outcome::miss ? trace::category::jit_compile : trace::category::jit_cache_hit;
  s.begin_ns = begin;
  s.end_ns = trace::now_ns();
  s.name = p.name() + " (" + to_string(r.outcome) + ")";
  s.label = trace::current_label();
  trace::record(std::move(s));
  return r;
}
}  // namespace

compile_result compiler::compile(const program& p, int compute_capability, const compile_options& o,
                                 output_request request, std::source_location where) {
  return traced(p, [&] {
    const nvrtc_info& nvrtc = nvrtc_identity();
    return compile_with(p, select_target(compute_capability, nvrtc.supported_archs, request, where), o, nvrtc,
                        retarget{compute_capability, request}, where);
  });
}

compile_result compiler::compile(const program& p, const target& t, const compile_options& o,
                                 std::source_location where) {
  return traced(p, [&] { return compile_with(p, t, o, nvrtc_identity(), std::nullopt, where); });
}

compile_result compiler::compile_with(const program& p, const target& t, const compile_options& o,
                                      const nvrtc_info& nvrtc, std::optional<retarget> chosen,
                                      std::source_location where) {
  o.check(where);  // before the caches: a hit must not hide options that a compile would refuse
  const cache_key key = make_cache_key(p, t, o, nvrtc);
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
  auto fail = [&] {
    {
      std::unique_lock lock(mutex_);
      in_flight_.erase(key);
    }
    promise.set_exception(std::current_exception());
  };
  std::optional<target> again;  // set when the key was computed for another NVRTC than the one loaded
  try {
    if (disk_) {
      if (auto hit = disk_->load(key)) {
        auto result = std::make_shared<const compiled_program>(std::move(*hit));
        finish(result);
        return {std::move(result), cache_outcome::disk_hit, key};
      }
    }
    // A miss: NVRTC runs, so load it, and check the identity the key (and the target) was computed for.
    const nvrtc_info& loaded = nvrtc_library();
    if (&nvrtc != &loaded) {
      identity_.store(&loaded, std::memory_order_release);
      if (!same_nvrtc_identity(nvrtc, loaded)) {
        // The record named another NVRTC (it should not: the fingerprint covers the loader's choice). Record the
        // real one, then choose the target and key again for it, below.
        identity_mismatches_.fetch_add(1, std::memory_order_relaxed);
        if (disk_) {
          try {
            if (record_nvrtc_identity(disk_->directory(), where))
              identity_records_.fetch_add(1, std::memory_order_relaxed);
          } catch (const std::exception&) {
          }
        }
        again = chosen ? select_target(chosen->compute_capability, loaded.supported_archs, chosen->request, where) : t;
      }
    }
    if (!again) {
      record_identity();
      const std::string pch = o.precompiled_headers ? pch_directory(where) : std::string();
      auto result = std::make_shared<const compiled_program>(jit::compile(p, t, o, pch, where));
      compiles_.fetch_add(1, std::memory_order_relaxed);
      if (disk_) {
        try {
          disk_->store(key, *result, where);
        } catch (const cache_error&) {
          // Counted in store_failures: the cache is an optimisation, the compile succeeded.
        }
      }
      finish(result);
      return {std::move(result), cache_outcome::miss, key};
    }
  } catch (...) {
    fail();
    throw;
  }
  // Compile under the right key (which may equal this one: give it up first, so that the call does not wait for
  // itself); whoever waits on this key gets that result.
  {
    std::unique_lock lock(mutex_);
    in_flight_.erase(key);
  }
  try {
    compile_result result = compile_with(p, *again, o, nvrtc_library(), chosen, where);
    promise.set_value(result.program);
    return result;
  } catch (...) {
    promise.set_exception(std::current_exception());
    throw;
  }
}

compiler_stats compiler::stats() const noexcept {
  compiler_stats s;
  s.memory_hits = memory_hits_.load();
  s.compiles = compiles_.load();
  s.identity_records = identity_records_.load();
  s.identity_mismatches = identity_mismatches_.load();
  if (disk_) s.disk = disk_->stats();
  return s;
}

void compiler::clear_memory() {
  std::unique_lock lock(mutex_);
  memory_.clear();
}

compiler& default_compiler(std::source_location where) {
  static compiler instance(where);
  return instance;
}

}  // namespace cuasync::jit
