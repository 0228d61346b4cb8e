#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# On the GPU machine: predicted deadlines on vs off, in one call. The 100,000-coroutine io-thread gap
# (cuasync_cold_paths_probe 3, alternated, then once with the io thread's call stacks during gaps over 3 ms) and the
# wait-accuracy sweep (prediction on and off at the default executor window of 150 us, and on with a 400 us window).
# Usage: scripts/gpu-prediction-check.sh OUT PACK_DIR   (PACK_DIR from scripts/gpu-pack.sh, or one holding
# bench/async_io/cuasync_{cold_paths_probe,wait_accuracy_bench}, plugins/libcuasync.so* and commit.txt).
# SCALE (default 0.4) is the wait-accuracy bench's CUASYNC_WAIT_SCALE. Results: OUT/prediction-check.tgz and
# OUT/stacks.txt (resolve a frame with `addr2line -f -C -e FILE OFFSET` against the same build).
set -u
out=${1:?usage: gpu-prediction-check.sh OUT PACK_DIR}
b=$(cd "${2:?usage: gpu-prediction-check.sh OUT PACK_DIR}" && pwd)
echo "commit $(cat "$b/commit.txt")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
probe=$(find "$b/bench" -name cuasync_cold_paths_probe -type f | head -1)
wa=$(find "$b/bench" -name cuasync_wait_accuracy_bench -type f | head -1)
lib=$(find "$b/plugins" -name 'libcuasync.so' | head -1)
work=$(mktemp -d)
for v in 1 0 1 0; do
  echo "== probe 3, CUASYNC_POLL_PREDICT=$v"
  CUASYNC_POLL_PREDICT=$v timeout 60 "$probe" 3 2>&1 | tail -3
done
echo "== probe 3 with gap stacks (prediction on)"
CUASYNC_POLL_PREDICT=1 CUASYNC_PROBE_GAP_STACKS=1 timeout 60 "$probe" 3 > "$work/stacks.txt" 2>&1
grep -v "^  #" "$work/stacks.txt" | tail -15
for cfg in "1 150" "0 150" "1 400"; do
  set -- $cfg
  d=$work/wa-predict$1-window$2
  mkdir -p "$d"
  echo "== wait_accuracy predict=$1 window=$2 us"
  CUASYNC_WAIT_SCALE=${SCALE:-0.4} CUASYNC_POLL_PREDICT=$1 CUASYNC_WAIT_WINDOW_US=$2 timeout 100 "$wa" "$d" "$lib" \
    > "$d/log.txt" 2>&1
  echo "rc=$?"
  grep -E "^\| wait [0-9]+ [um]s, (repeated|first)|^\| CPU|summary" "$d/wait_accuracy.md" |
    cut -d'|' -f2,4,5,7,8,9 | sed 's/busy cuEventQuery//'
done
tar czf "$out/prediction-check.tgz" -C "$work" .
cp "$work/stacks.txt" "$out/stacks.txt"
