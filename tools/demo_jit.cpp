// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The demo's JIT part (demo_jit.hpp): cold compile, memory hit, disk cache, timed.
#include "demo_jit.hpp"

#include "cli.hpp"
#include "demo_kernels.hpp"

#include <cuasync/jit.hpp>

#include <chrono>

namespace cuasync::tools::demo {
namespace {

template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

jit_report measure_jit(std::optional<int> compute_capability) {
  jit_report r;
  const bool loaded_before = jit::nvrtc_loaded();
  const jit::nvrtc_info* nvrtc = nullptr;
  try {
    r.nvrtc_load_ms = time_ms([&] { nvrtc = &jit::nvrtc_library(); });
  } catch (const cuda_error& e) {
    r.nvrtc_error = error_text(e);
    return r;
  }
  if (loaded_before) r.nvrtc_load_ms = 0;
  r.nvrtc_version = nvrtc->version_string();
  r.nvrtc_library = nvrtc->library;
  // Without a GPU there is no architecture to match: a CUBIN (what a GPU run loads, so the times include NVRTC's
  // machine-code step) for the oldest architecture this NVRTC supports, a choice that assumes no particular GPU.
  const int cc = compute_capability.value_or(nvrtc->supported_archs.front());
  r.target_reason = compute_capability ? "the GPU's architecture"
                                       : "no GPU to match: the oldest architecture this NVRTC supports";
  const jit::target t = jit::select_target(cc, jit::output_request::automatic);
  r.target = t.to_string();
  const jit::program program(kernel_program_name, kernel_source);

  // Cold: no disk cache, a compiler of its own, so NVRTC runs whatever earlier runs left behind.
  jit::disk_cache_settings no_disk;
  no_disk.enabled = false;
  jit::compiler cold(no_disk);
  jit::compile_result compiled;
  r.cold_ms = time_ms([&] { compiled = cold.compile(program, t); });
  r.image_bytes = compiled->image.size();
  r.memory_hit_us = 1e3 * time_ms([&] { compiled = cold.compile(program, t); });

  // The disk cache as the runtime's kernel cache uses it (CUASYNC_CACHE_DIR, CUASYNC_CACHE=0).
  try {
    const jit::disk_cache_settings settings = jit::disk_cache_settings::from_environment();
    if (!settings.enabled) {
      r.cache_note = "off (CUASYNC_CACHE=0)";
      return r;
    }
    jit::compiler first(settings);
    r.disk_first_ms = time_ms([&] { compiled = first.compile(program, t); });
    r.disk_first_outcome = jit::to_string(compiled.outcome);
    r.cache_directory = first.disk()->directory().string();
    jit::compiler second(settings);
    r.disk_hit_ms = time_ms([&] { compiled = second.compile(program, t); });
    if (compiled.outcome != jit::cache_outcome::disk_hit)
      r.cache_note = std::string("the second fresh compiler got a ") + jit::to_string(compiled.outcome) +
                     " (the entry could not be stored?)";
  } catch (const jit::cache_error& e) {
    r.cache_note = "refused: " + error_text(e);
  }
  return r;
}

}  // namespace cuasync::tools::demo
