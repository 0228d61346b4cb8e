#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Issue 14 on the two-GPU machine (nvidia-h200-x2): the [multi_gpu] tests (one process for both GPUs, one process
# per GPU, faults), the IPC examples (legacy handles, fd) across two processes, and bench/multi_gpu; a short table last.
# Usage (on the GPU machine, the build carried): scripts/multi-gpu.sh OUT_DIR [BUILD_DIR]   (BUILD_DIR: build-gpu
# from scripts/gpu-pack.sh, or build). Leaves OUT_DIR/summary.txt, the bench's JSON and markdown, and
# OUT_DIR/results.tgz (every log). ~2-3 minutes.
set -uo pipefail
out=${1:?usage: multi-gpu.sh OUT_DIR [BUILD_DIR]}
build=${2:-build-gpu}
[ -d "$build" ] || build=build
mkdir -p "$out"
work=$(mktemp -d)
export CUASYNC_COMMIT=$(cat "$build/commit.txt" 2>/dev/null || echo unknown)
# NVLink multicast (NVLS) can take the shared host's GPUs out of service for a day: off for everything here.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The NCCL PyTorch uses (the baselines were measured with it), unless the caller named one.
if [ -z "${CUASYNC_LIBNCCL:-}" ]; then
  for f in /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -f "$f" ] && export CUASYNC_LIBNCCL="$f" && break
  done
fi
echo "commit $CUASYNC_COMMIT, CUASYNC_LIBNCCL=${CUASYNC_LIBNCCL:-<search>}"
summary=()

step() {  # step NAME LIMIT_S COMMAND...: runs it with a timeout, printing line by line into the log too
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  echo "== $name"
  timeout --kill-after=10 "$limit" stdbuf -oL -eL "$@" 2>&1 | tee "$work/$name.log"
  local rc=${PIPESTATUS[0]}
  local line=$(grep -E "^(All tests passed|test cases:|No tests ran)" "$work/$name.log" | tail -1)
  summary+=("$name: rc=$rc $(( $(date +%s) - start ))s $line")
}

nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader 2>&1 | tee "$work/gpu.txt"
nvidia-smi topo -m > "$work/topo.txt" 2>&1
[ -x "$build/tools/cuasync" ] && step info 60 "$build/tools/cuasync" info

# Tests: every collectives case (CPU ones too), then the runtime's and async_io's multi-GPU cases. -d yes prints each
# test case as it ends.
# The fault cases run apart, each in its own step: one that hangs cannot hide the others (a child that times out
# prints its threads' stacks before it is killed).
step tests-collectives 150 "$build/tests/collectives/cuasync_collectives_tests" -d yes "~[fault]"
step tests-fault-gpu 75 "$build/tests/collectives/cuasync_collectives_tests" -d yes \
  "a fault on one GPU reaches the waiters of its collective on both, without a hang"
step tests-fault-timeout 75 "$build/tests/collectives/cuasync_collectives_tests" -d yes \
  "a rank whose peer never joins the collective fails after its timeout, aborted"
step tests-runtime-multi_gpu 60 "$build/tests/runtime/cuasync_runtime_tests" -d yes "[multi_gpu]"
step tests-async_io-multi_gpu 60 "$build/tests/async_io/cuasync_async_io_tests" -d yes "[multi_gpu]"
step tests-driver-ipc 60 "$build/tests/driver/cuasync_driver_tests" -d yes "[ipc]"
# IPC: producer on GPU 0 and consumer on GPU 1, two processes.
[ -x "$build/examples/ipc/example_ipc_producer_consumer" ] &&
  step example-ipc 45 "$build/examples/ipc/example_ipc_producer_consumer"
# The same across two processes with a POSIX file descriptor of VMM memory (SCM_RIGHTS).
[ -x "$build/examples/ipc/example_ipc_fd_producer_consumer" ] &&
  step example-ipc-fd 45 "$build/examples/ipc/example_ipc_fd_producer_consumer"

step bench-multi_gpu 200 "$build/bench/multi_gpu/cuasync_multi_gpu_bench" "$work"
cp "$work"/multi_gpu*.json "$work"/multi_gpu*.md "$out"/ 2>/dev/null

{
  echo "== failures (first lines) =="
  for f in "$work"/tests-*.log; do grep -B3 -A12 "FAILED" "$f" | head -60; done
  echo "== bench =="
  cat "$work"/multi_gpu*.md 2>/dev/null
  echo "== summary ($CUASYNC_COMMIT) =="
  cat "$work/gpu.txt"
  printf '%s\n' "${summary[@]}"
} > "$work/summary.txt"
cp "$work/summary.txt" "$out/"
tar -C "$work" -czf "$out/results.tgz" .
echo
cat "$work/summary.txt"
