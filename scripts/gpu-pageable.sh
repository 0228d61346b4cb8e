#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The pageable-copy run on the GPU machine, in one call: the runtime's staged and ordered-copy tests, the C
# conformance suite, the runtime bench (staged copies against the pinned bound, the store kinds and the unramped
# copy beside the default), then the cold C ABI probe and the three cold-path probes, each a fresh process. Prints
# line by line (a killed run still returns what it printed) and leaves OUT_DIR/runtime.{json,md}.
# Usage: scripts/gpu-pageable.sh OUT_DIR [BUILD_DIR]. Pack first (here):
#   CUASYNC_PACK_SKIP='^\./(tests/(allocations|callgrind|soak|fake_driver|fake_nccl|collectives|jit|trace|driver|engine|fault_injection|async_io)|bench/(multi_gpu|jit|driver|trace|python)|examples|tools)/' \
#     scripts/gpu-pack.sh build build-gpu
# then carry ["build-gpu"] and run scripts/gpu-pageable.sh $OUT build-gpu (about 2-3 minutes).
set -uo pipefail
out=${1:?usage: gpu-pageable.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
lib="$(cd "$build/plugins" && pwd)/libcuasync.so"
export CUASYNC_COMMIT=$(cat "$build/commit.txt" 2>/dev/null || echo unknown)
step() {
  echo "== $*"
  local start=$(date +%s)
  "$@" 2>&1 | grep -Ev '^\s*$' | tail -n 25
  echo "-- rc=${PIPESTATUS[0]} $(( $(date +%s) - start ))s"
}
# Not the [.simulated] cases: their gate kernel is a no-op on a real GPU.
step timeout 120 "$build/tests/runtime/cuasync_runtime_tests" "[staged]~[simulated]"
step timeout 60 "$build/tests/runtime/cuasync_runtime_tests" "[ordered]~[simulated],[cold]~[simulated],[pinned]"
step timeout 120 "$build/tests/plugins/cuasync_conformance" "$lib"
step timeout 200 "$build/bench/runtime/cuasync_runtime_bench" "$out"
grep -E "pageable|pinned bound|store kinds" "$out/runtime.md" 2>/dev/null
step timeout 60 "$build/bench/plugins/cuasync_c_abi_copy_probe" "$lib"
for part in 1 2 3; do step timeout 90 "$build/bench/async_io/cuasync_cold_paths_probe" "$part"; done
