// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/jit/compiler.hpp>

#include <cuasync/jit/compile_farm.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/scope.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/nvrtc_identity.hpp>
#include <cuasync/log.hpp>

#include <cstdio>

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

compiler::~compiler() {
  if (!disk_) return;
  const cache_counts c = stats().counts();
  if (!c.empty()) add_cache_counts(disk_->directory(), c);
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

const nvrtc_info* compiler::known_nvrtc_identity() noexcept {
  if (const nvrtc_info* known = identity_.load(std::memory_order_acquire)) [[likely]] return known;
  if (const nvrtc_info* loaded = detail::loaded_nvrtc_info()) {
    identity_.store(loaded, std::memory_order_release);
    record_identity();
    return loaded;
  }
  if (!disk_) return nullptr;
  try {
    std::call_once(recorded_once_, [this] { recorded_ = recorded_nvrtc_identity(disk_->directory()); });
  } catch (...) {  // out of memory reading the record: as without one
    return nullptr;
  }
  if (!recorded_) return nullptr;
  // Another thread may have loaded NVRTC meanwhile and published it: keep that one.
  const nvrtc_info* expected = nullptr;
  identity_.compare_exchange_strong(expected, &*recorded_, std::memory_order_acq_rel);
  return identity_.load(std::memory_order_acquire);
}

const nvrtc_info& compiler::nvrtc_identity() {
  if (const nvrtc_info* known = known_nvrtc_identity()) [[likely]] return *known;
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
// And as a log line: a miss or a disk hit at info, a memory hit at debug.
void log_outcome(const compiler& c, const program& p, const compile_result& r, std::int64_t begin_ns,
                 bool farmed) noexcept {
  const auto l = r.outcome == cache_outcome::memory_hit ? logging::level::debug : logging::level::info;
  logging::write_with(l, [&] {
    const double ms = static_cast<double>(trace::now_ns() - begin_ns) / 1e6;
    char took[32];
    std::snprintf(took, sizeof took, "%.1f ms", ms);
    const char* miss = farmed ? "JIT cache miss, compiled by the compile farm" : "JIT cache miss, compiled by NVRTC";
    const char* what = r.outcome == cache_outcome::miss       ? miss
                       : r.outcome == cache_outcome::disk_hit ? "JIT disk cache hit"
                                                              : "JIT memory cache hit";
    // This compiler's counts so far: the log says the hit rates as they develop.
    return std::string(what) + ": '" + p.name() + "' as " + r->target.to_string() + " (" + took + "); " +
           c.stats().counts().describe();
  });
}

template <class Compile>
compile_result traced(const compiler& c, const program& p, bool farmed, Compile&& compile) {
  const bool logged = logging::enabled(logging::level::info);
  if (!trace::enabled() && !logged) [[likely]] return compile();
  const std::int64_t begin = trace::now_ns();
  compile_result r = compile();
  if (logged) log_outcome(c, p, r, begin, farmed);
  if (!trace::enabled()) return r;
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
  return traced(*this, p, farm() != nullptr, [&] {
    const nvrtc_info& nvrtc = nvrtc_identity();
    return compile_with(p, select_target(compute_capability, nvrtc.supported_archs, request, where), o, nvrtc,
                        retarget{compute_capability, request}, where);
  });
}

compile_result compiler::compile(const program& p, const target& t, const compile_options& o,
                                 std::source_location where) {
  return traced(*this, p, farm() != nullptr,
                [&] { return compile_with(p, t, o, nvrtc_identity(), std::nullopt, where); });
}

compiler::claim compiler::claim_key(const cache_key& key, waiter* async_waiter) {
  std::shared_future<shared_program> pending;
  {
    std::shared_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) [[likely]] {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return {it->second, std::nullopt};
    }
  }
  claim c;
  {
    std::unique_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      return {it->second, std::nullopt};
    }
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      if (async_waiter) {  // told by whoever makes it (counted as a hit then, as a blocking caller is)
        it->second.waiters.push_back(std::move(*async_waiter));
        memory_hits_.fetch_add(1, std::memory_order_relaxed);
        return c;
      }
      pending = it->second.future;
    } else {
      memory_misses_.fetch_add(1, std::memory_order_relaxed);
      c.promise.emplace();
      in_flight_.emplace(key, flight{c.promise->get_future().share(), {}});
      return c;
    }
  }
  // Another thread of this process is making it: wait for that one (its failure is thrown here too).
  c.found = pending.get();
  memory_hits_.fetch_add(1, std::memory_order_relaxed);
  return c;
}

namespace {
void tell(std::vector<std::function<void(const std::shared_ptr<const compiled_program>&, std::exception_ptr)>>& waiters,
          const std::shared_ptr<const compiled_program>& result, const std::exception_ptr& error) noexcept {
  for (auto& w : waiters) try {
      w(result, error);
    } catch (...) {
      // A completion's exception has nobody to go to.
    }
}
}  // namespace

std::vector<compiler::waiter> compiler::take_waiters(const cache_key& key) {
  std::vector<waiter> waiters;
  std::unique_lock lock(mutex_);
  if (auto it = in_flight_.find(key); it != in_flight_.end()) {
    waiters = std::move(it->second.waiters);
    in_flight_.erase(it);
  }
  return waiters;
}

void compiler::publish(const cache_key& key, std::promise<shared_program>& promise, const shared_program& result) {
  std::vector<waiter> waiters;
  {
    std::unique_lock lock(mutex_);
    memory_.emplace(key, result);
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      waiters = std::move(it->second.waiters);
      in_flight_.erase(it);
    }
  }
  promise.set_value(result);
  tell(waiters, result, nullptr);
}

void compiler::abandon(const cache_key& key, std::promise<shared_program>& promise, std::exception_ptr error) noexcept {
  std::vector<waiter> waiters;
  try {
    waiters = take_waiters(key);
  } catch (...) {
  }
  promise.set_exception(error);
  tell(waiters, nullptr, error);
}

compiler::shared_program compiler::load_from_disk(const cache_key& key) {
  if (!disk_) return nullptr;
  if (auto hit = disk_->load(key)) return std::make_shared<const compiled_program>(std::move(*hit));
  return nullptr;
}

void compiler::store_on_disk(const cache_key& key, const compiled_program& result,
                             std::source_location where) noexcept {
  if (!disk_) return;
  try {
    disk_->store(key, result, where);
  } catch (const std::exception&) {
    // Counted in store_failures: the cache is an optimisation, the compile succeeded.
  }
}

std::optional<target> compiler::check_loaded_nvrtc(const nvrtc_info& nvrtc, const target& t,
                                                   std::optional<retarget> chosen, std::source_location where) {
  const nvrtc_info& loaded = nvrtc_library();
  if (&nvrtc == &loaded) return std::nullopt;
  identity_.store(&loaded, std::memory_order_release);
  if (same_nvrtc_identity(nvrtc, loaded)) return std::nullopt;
  // The record named another NVRTC (it should not: the fingerprint covers the loader's choice). Record the real one,
  // then choose the target and key again for it.
  identity_mismatches_.fetch_add(1, std::memory_order_relaxed);
  if (disk_) {
    try {
      if (record_nvrtc_identity(disk_->directory(), where)) identity_records_.fetch_add(1, std::memory_order_relaxed);
    } catch (const std::exception&) {
    }
  }
  return chosen ? select_target(chosen->compute_capability, loaded.supported_archs, chosen->request, where) : t;
}

compiler::shared_program compiler::compile_miss(const program& p, const target& t, const compile_options& o,
                                                const cache_key& key, std::source_location where) {
  record_identity();
  const std::string pch = o.precompiled_headers ? pch_directory(where) : std::string();
  shared_program result;
  if (compile_farm* f = farm()) {
    auto done = std::make_shared<std::promise<shared_program>>();
    auto future = done->get_future();
    f->submit_prepared(
        p, t, o.arguments(t, pch, where), key,
        [done](shared_program r, std::exception_ptr e) {
          if (e) done->set_exception(e);
          else done->set_value(std::move(r));
        },
        where);
    result = future.get();
  } else {
    result = std::make_shared<const compiled_program>(jit::compile(p, t, o, pch, where));
  }
  compiles_.fetch_add(1, std::memory_order_relaxed);
  store_on_disk(key, *result, where);
  return result;
}

compile_result compiler::compile_with(const program& p, const target& t, const compile_options& o,
                                      const nvrtc_info& nvrtc, std::optional<retarget> chosen,
                                      std::source_location where) {
  o.check(where);  // before the caches: a hit must not hide options that a compile would refuse
  const cache_key key = make_cache_key(p, t, o, nvrtc);
  claim c = claim_key(key);
  if (c.found) [[likely]] return {std::move(c.found), cache_outcome::memory_hit, key};
  std::promise<shared_program>& promise = *c.promise;
  std::optional<target> again;  // set when the key was computed for another NVRTC than the one loaded
  try {
    if (shared_program hit = load_from_disk(key)) {
      publish(key, promise, hit);
      return {std::move(hit), cache_outcome::disk_hit, key};
    }
    // A miss: NVRTC runs, so load it, and check the identity the key (and the target) was computed for.
    again = check_loaded_nvrtc(nvrtc, t, chosen, where);
    if (!again) {
      shared_program result = compile_miss(p, t, o, key, where);
      publish(key, promise, result);
      return {std::move(result), cache_outcome::miss, key};
    }
  } catch (...) {
    abandon(key, promise, std::current_exception());
    throw;
  }
  return compile_again(p, *again, o, key, promise, chosen, where);
}

compile_result compiler::compile_again(const program& p, const target& again, const compile_options& o,
                                       const cache_key& key, std::promise<shared_program>& promise,
                                       std::optional<retarget> chosen, std::source_location where) {
  // Give the old key up first (the right key may equal it: the call must not wait for itself); whoever waits on it
  // gets the result made under the right key.
  std::vector<waiter> waiters = take_waiters(key);
  try {
    compile_result result = compile_with(p, again, o, nvrtc_library(), chosen, where);
    promise.set_value(result.program);
    tell(waiters, result.program, nullptr);
    return result;
  } catch (...) {
    promise.set_exception(std::current_exception());
    tell(waiters, nullptr, std::current_exception());
    throw;
  }
}

compiler_stats compiler::stats() const noexcept {
  compiler_stats s;
  s.memory_hits = memory_hits_.load();
  s.memory_misses = memory_misses_.load();
  s.compiles = compiles_.load();
  s.links = links_.load();
  s.identity_records = identity_records_.load();
  s.identity_mismatches = identity_mismatches_.load();
  s.preloads = preloads_.load();
  if (disk_) s.disk = disk_->stats();
  return s;
}

void compiler::clear_memory() {
  std::unique_lock lock(mutex_);
  memory_.clear();
}

compiler& default_compiler(std::source_location where) {
  // The farm first: statics are destroyed in reverse, so it outlives the compiler that uses it.
  static const std::unique_ptr<compile_farm> farm = [&]() -> std::unique_ptr<compile_farm> {
    if (auto o = farm_options::from_environment(where)) return std::make_unique<compile_farm>(std::move(*o));
    return nullptr;
  }();
  static compiler instance(where);
  static const bool farmed = (farm ? instance.use_farm(*farm) : void(), true);
  (void)farmed;
  return instance;
}

}  // namespace cuasync::jit
