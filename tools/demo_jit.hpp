// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The demo's JIT part, which needs no GPU: the demo's kernels compiled with NVRTC with no cache (cold), the same
// compiler again (a memory hit), then through the disk cache in fresh compilers (a miss or a hit left by an earlier
// run, then a hit), so the cache's effect is measured, not claimed.
#include <optional>
#include <string>

namespace cuasync::tools::demo {

struct jit_report {
  std::string nvrtc_error;  //!< why NVRTC did not load (empty: it did); then nothing below was measured
  std::string nvrtc_version, nvrtc_library;
  double nvrtc_load_ms = 0;  //!< loading NVRTC (0 when this process had loaded it already)
  std::string target, target_reason;
  std::size_t image_bytes = 0;
  double cold_ms = 0;          //!< NVRTC compiling, no cache at all
  double memory_hit_us = 0;    //!< the same compile again from the compiler's memory
  std::string cache_directory; //!< empty: the disk cache is off (CUASYNC_CACHE=0) or refused (cache_note says why)
  std::string cache_note;
  std::string disk_first_outcome;  //!< "miss" (first run) or "disk hit" (an earlier run stored it)
  double disk_first_ms = 0;
  double disk_hit_ms = 0;          //!< a fresh compiler, the entry now on disk
};

//! Compiles the demo's program for `compute_capability` (the GPU's; nothing: no GPU, a CUBIN for the oldest
//! architecture the loaded NVRTC supports), `target_reason` saying which.
//! Never throws for NVRTC or cache trouble: it is reported. @throws jit::compile_error (a bug in the demo's source)
jit_report measure_jit(std::optional<int> compute_capability);

}  // namespace cuasync::tools::demo
