// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compiler's completion form (compile_async): the caches looked up on the calling thread, a miss handed to the
// compile farm, the result published, stored and told to every caller of the key from the farm's delivery thread.
#include <cuasync/jit/compile_farm.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/log.hpp>

namespace cuasync::jit {
namespace {

void call(const compiler::callback& done, compile_result r, std::exception_ptr e) noexcept {
  try {
    done(std::move(r), e);
  } catch (...) {
    // Documented: dropped.
  }
}

void log_async(const std::string& name, const compile_result& r) noexcept {
  logging::write_with(r.outcome == cache_outcome::memory_hit ? logging::level::debug : logging::level::info, [&] {
    const char* what = r.outcome == cache_outcome::miss       ? "JIT cache miss, compiled by the compile farm"
                       : r.outcome == cache_outcome::disk_hit ? "JIT disk cache hit"
                                                              : "JIT memory cache hit";
    return std::string(what) + ": '" + name + "' as " + r->target.to_string();
  });
}

}  // namespace

void compiler::async_with(compile_farm& farm, const program& p, const target& t, const compile_options& o,
                          const nvrtc_info& nvrtc, std::optional<retarget> chosen,
                          const std::shared_ptr<callback>& done, std::source_location where) {
  o.check(where);
  const cache_key key = make_cache_key(p, t, o, nvrtc);
  waiter joined = [done, key](const shared_program& r, std::exception_ptr e) {
    if (e) return call(*done, {}, e);
    call(*done, {r, cache_outcome::memory_hit, key}, nullptr);
  };
  claim c = claim_key(key, &joined);
  if (c.found) return call(*done, {std::move(c.found), cache_outcome::memory_hit, key}, nullptr);
  if (!c.promise) return;  // joined another caller's compile
  // Nothing below throws out: every failure is this compile's outcome.
  auto promise = std::make_shared<std::promise<shared_program>>(std::move(*c.promise));
  std::optional<target> again;
  try {
    if (shared_program hit = load_from_disk(key)) {
      publish(key, *promise, hit);
      compile_result r{std::move(hit), cache_outcome::disk_hit, key};
      log_async(p.name(), r);
      return call(*done, std::move(r), nullptr);
    }
    again = check_loaded_nvrtc(nvrtc, t, chosen, where);
    if (!again) {
      record_identity();
      const std::string pch = o.precompiled_headers ? pch_directory(where) : std::string();
      farm.submit_prepared(
          p, t, o.arguments(t, pch, where), key,
          [this, key, promise, done, name = p.name(), where](shared_program r, std::exception_ptr e) {
            if (e) {
              abandon(key, *promise, e);
              return call(*done, {}, e);
            }
            compiles_.fetch_add(1, std::memory_order_relaxed);
            store_on_disk(key, *r, where);
            publish(key, *promise, r);
            compile_result out{std::move(r), cache_outcome::miss, key};
            log_async(name, out);
            call(*done, std::move(out), nullptr);
          },
          where);
      return;
    }
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    abandon(key, *promise, e);
    return call(*done, {}, e);
  }
  // The key was made for another NVRTC than the one loaded (rare): compile again under the right key, here.
  compile_result r;
  std::exception_ptr e;
  try {
    r = compile_again(p, *again, o, key, *promise, chosen, where);
  } catch (...) {
    e = std::current_exception();
  }
  call(*done, std::move(r), e);
}

void compiler::compile_async(const program& p, const target& t, const compile_options& o, callback done,
                             std::source_location where) {
  auto shared = std::make_shared<callback>(std::move(done));
  compile_result r;
  std::exception_ptr e;
  try {
    if (compile_farm* f = farm()) return async_with(*f, p, t, o, nvrtc_identity(), std::nullopt, shared, where);
    r = compile(p, t, o, where);
  } catch (...) {  // before anything was handed on: this call's outcome
    e = std::current_exception();
  }
  call(*shared, std::move(r), e);
}

void compiler::compile_async(const program& p, int compute_capability, const compile_options& o,
                             output_request request, callback done, std::source_location where) {
  auto shared = std::make_shared<callback>(std::move(done));
  compile_result r;
  std::exception_ptr e;
  try {
    if (compile_farm* f = farm()) {
      const nvrtc_info& nvrtc = nvrtc_identity();
      return async_with(*f, p, select_target(compute_capability, nvrtc.supported_archs, request, where), o, nvrtc,
                        retarget{compute_capability, request}, shared, where);
    }
    r = compile(p, compute_capability, o, request, where);
  } catch (...) {
    e = std::current_exception();
  }
  call(*shared, std::move(r), e);
}

}  // namespace cuasync::jit
