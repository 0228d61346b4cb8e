// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compiler's cached links: the memory cache, then the disk cache, then nvJitLink, keyed by make_link_key.
#include <cuasync/jit/compiler.hpp>
#include <cuasync/log.hpp>
#include <cuasync/trace/clock.hpp>

#include <cstdio>

namespace cuasync::jit {

compile_result compiler::link(std::span<const link_part> parts, int arch, const link_options& lo, std::string name,
                              std::source_location where) {
  lo.check(where);  // before the caches: a hit must not hide options that a link would refuse
  if (name.empty()) name = default_link_name(parts);
  const std::int64_t begin = trace::now_ns();
  const cache_key key = make_link_key(parts, arch, lo, name, nvjitlink_library());
  claim c = claim_key(key);
  if (c.found) [[likely]] return {std::move(c.found), cache_outcome::memory_hit, key};
  compile_result out{nullptr, cache_outcome::miss, key};
  try {
    if (disk_)
      if (auto hit = disk_->load(key)) {
        out.program = std::make_shared<const compiled_program>(std::move(*hit));
        out.outcome = cache_outcome::disk_hit;
      }
    if (!out.program) {
      out.program = std::make_shared<const compiled_program>(jit::link(parts, arch, lo, name, where));
      links_.fetch_add(1, std::memory_order_relaxed);
      if (disk_) {
        try {
          disk_->store(key, *out.program, where);
        } catch (const cache_error&) {
          // Counted in store_failures: the cache is an optimisation, the link succeeded.
        }
      }
    }
    publish(key, *c.promise, out.program);
  } catch (...) {
    abandon(key, *c.promise, std::current_exception());
    throw;
  }
  logging::write_with(logging::level::info, [&] {
    char took[32];
    std::snprintf(took, sizeof took, "%.1f ms", static_cast<double>(trace::now_ns() - begin) / 1e6);
    return std::string(out.outcome == cache_outcome::miss ? "JIT link cache miss, linked by nvJitLink"
                                                          : "JIT link disk cache hit") +
           ": '" + name + "' of " + std::to_string(parts.size()) + " part(s) for sm_" + std::to_string(arch) + " (" +
           took + "); " + stats().counts().describe();
  });
  return out;
}

compile_result compiler::link_programs(std::span<const program> programs, int compute_capability,
                                       const compile_options& o, const link_options& lo, std::string name,
                                       std::source_location where) {
  compile_options rdc = o;
  rdc.relocatable_device_code = true;
  std::vector<link_part> parts;
  parts.reserve(programs.size());
  for (const program& p : programs)
    parts.emplace_back(compile(p, compute_capability, rdc, output_request::ltoir, where));
  return link(parts, compute_capability, lo, std::move(name), where);
}

}  // namespace cuasync::jit
