#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# On the GPU machine: awaitable replays (issue 30 scope 2, replay_anchor) alone, ~1 min: the C++ [replay][gpu] cases
# (10,000 gated replays, generations between passes, a wait polled inside the capture, a fault in replay 4), the C
# ABI 1.6 conformance part (--gpu: 10,000 replays; the whole suite runs), the Python ReplayAnchor tests, and the
# per-replay await bench against raw cuGraphLaunch + busy cuEventQuery. Writes OUT/replay.log (everything, line by
# line), OUT/replay_await.{json,md}.
# Pack here first (~32 MiB with the wheel):
#   CUASYNC_PACK_SKIP='^\./(tests/(allocations|callgrind|soak|fake_driver|fake_nccl|collectives|jit|trace|driver|engine|fault_injection|runtime|consumer|tools)|bench/(multi_gpu|jit|runtime|driver|plugins|trace)|examples|tools)/' scripts/gpu-pack.sh
# then carry ["build-gpu"] and run: scripts/gpu-replay.sh $OUT build-gpu
# Usage: scripts/gpu-replay.sh OUT [BUILD_DIR]   (BUILD_DIR: the packed build, default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-replay.sh OUT [BUILD_DIR]}
build=${2:-build-gpu}
mkdir -p "$out"
log=$out/replay.log
status=0
step() {  # name, command...: runs it with its output in the log as it comes, and notes its status
  local name=$1
  shift
  echo "=== $name: $*" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log" | tail -25
  local rc=${PIPESTATUS[0]}
  echo "=== $name: rc=$rc" | tee -a "$log"
  [ "$rc" = 0 ] || status=1
}
step cpp timeout 170 "$build/tests/async_io/cuasync_async_io_tests" "[replay][gpu]" --durations yes
step c_abi timeout 170 "$build/tests/plugins/cuasync_conformance" "$build/plugins/libcuasync.so" --gpu
step python timeout 120 scripts/python-tests.sh "$build/plugins/libcuasync.so" -q -rs -k test_replay
step bench timeout 120 "$build/bench/async_io/cuasync_replay_await_bench" "$out" 20
exit $status
