// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// bench/jit's farm mode (farm_mode.cpp).
namespace cuasync::bench {
//! `cuasync_jit_bench OUTPUT_DIR farm [KERNELS] [WORKERS] [REPETITIONS]`: writes jit_farm.json and jit_farm.md.
int farm_mode(int argc, char** argv);
//! The fresh-process side: `--child-farm-{serial,threads,farm,farm-warm} KERNELS WORKERS TAG`.
int farm_child(int argc, char** argv);
}  // namespace cuasync::bench
