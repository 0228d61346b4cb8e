// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// bench/jit's farm mode (farm_mode.cpp).
#include <string>

namespace cuasync::bench {
//! The compile farm's worker: $CUASYNC_JIT_WORKER, else build/plugins/cuasync-jit-worker (relative to this program).
std::string farm_worker_path();
//! `cuasync_jit_bench OUTPUT_DIR farm [KERNELS] [WORKERS] [REPETITIONS]`: writes jit_farm.json and jit_farm.md.
int farm_mode(int argc, char** argv);
//! The fresh-process side: `--child-farm-{serial,threads,farm,farm-warm} KERNELS WORKERS TAG`.
int farm_child(int argc, char** argv);
}  // namespace cuasync::bench

// bench/jit's warm mode (warm_mode.cpp).
namespace cuasync::bench {
//! `cuasync_jit_bench OUTPUT_DIR warm [KERNELS] [WORKERS] [REPETITIONS] [THREADS] [ptx]`: writes jit_warm.json and .md.
int warm_mode(int argc, char** argv);
//! The fresh-process side: `--child-warm-{fill,start} KERNELS DIR WORKERS|THREADS REQUEST`.
int warm_child(int argc, char** argv);
}  // namespace cuasync::bench
