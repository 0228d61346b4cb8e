#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# How `cuasync demo`'s defaults (slots, threads, parts: tools/demo_service.hpp) are chosen: the demo without its
# traced run at each setting, one line each from its headline, then the setting with the lowest time per request
# over the bound under load among those at >= 4x serial. On the GPU machine, with the build folder carried:
#   scripts/demo-sweep.sh [BUILD_DIR] [SETTINGS...]     each setting "SLOTS THREADS PARTS", e.g. "12 8 1"
# CUASYNC_DEMO_ARGS adds options to each run (e.g. "--ptx"). About 3-4 s per setting on the H200 (1,200 requests
# each way in 2 rounds); the output is plain text, line by line.
set -uo pipefail
build=${1:-build}
shift || true
settings=("$@")
if [ ${#settings[@]} -eq 0 ]; then
  settings=("4 8 1" "8 8 1" "12 8 1" "16 8 1" "24 8 1" "12 4 1" "16 4 1" "12 12 1" "16 12 1" "24 12 1"
            "8 8 2" "12 8 2" "16 8 2" "16 12 2" "8 8 4" "12 12 4")
fi
export CUASYNC_PROGRESS=0
best="" best_ratio=""
printf '%-16s %s\n' "slots threads parts" "what the run shows"
for s in "${settings[@]}"; do
  read -r slots threads parts <<< "$s"
  # shellcheck disable=SC2086  # CUASYNC_DEMO_ARGS: words
  line=$(timeout 90 "$build/tools/cuasync" demo ${CUASYNC_DEMO_ARGS:-} --no-trace --requests 1200 --rounds 2 \
           --slots "$slots" --threads "$threads" --parts "$parts" 2>&1 | grep -m1 '^what this run shows: ' |
         sed 's/^what this run shows: //')
  printf '%-16s %s\n' "$slots $threads $parts" "${line:-(no headline: the run failed)}"
  # "= 5.12x serial; ... = 1.08x the bound under load"
  speedup=$(sed -nE 's/.* = ([0-9.]+)x serial.*/\1/p' <<< "$line")
  ratio=$(sed -nE 's/.* = ([0-9.]+)x the bound under load.*/\1/p' <<< "$line")
  if [ -n "$speedup" ] && [ -n "$ratio" ] && awk -v x="$speedup" 'BEGIN { exit !(x >= 4) }' &&
     { [ -z "$best_ratio" ] || awk -v a="$ratio" -v b="$best_ratio" 'BEGIN { exit !(a < b) }'; }; then
    best="$s" best_ratio="$ratio"
  fi
done
echo "best (lowest time per request over the bound under load, at >= 4x serial):" \
     "${best:-none}${best_ratio:+ (${best_ratio}x)}"
