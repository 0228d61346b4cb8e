#!/usr/bin/env bash
# The GPU machine's run: every test executable (all [gpu] tests included), then every benchmark, then a short
# table. Usage (on the GPU machine, with the build folder carried): scripts/gpu-run.sh OUT_DIR [BUILD_DIR]
#   CUASYNC_GPU_TESTS="driver jit" / CUASYNC_GPU_BENCHES="driver" narrow what runs (default: all that are built).
set -uo pipefail
out=${1:?usage: gpu-run.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
export CUASYNC_COMMIT=$(cat "$build/commit.txt" 2>/dev/null || echo unknown)
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$out/gpu.txt" 2>&1 || true

for t in ${CUASYNC_GPU_TESTS:-driver jit runtime async_io plugins}; do
  bin="$build/tests/$t/cuasync_${t}_tests"
  [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout 420 "$bin" ${CUASYNC_TEST_ARGS:-} > "$out/tests-$t.log" 2>&1
  rc=$?
  line=$(grep -E "^(All tests passed|test cases:)" "$out/tests-$t.log" | tail -1)
  summary+=("tests $t: rc=$rc $(( $(date +%s) - start ))s  $line")
done

for ex in "$build"/examples/*/example_*; do
  [ -x "$ex" ] || continue
  name=$(basename "$ex")
  timeout 120 "$ex" > "$out/$name.log" 2>&1
  summary+=("$name: rc=$? $(tail -1 "$out/$name.log")")
done

for bnch in ${CUASYNC_GPU_BENCHES:-driver jit runtime async_io}; do
  bin="$build/bench/$bnch/cuasync_${bnch}_bench"
  [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout 300 "$bin" "$out" > "$out/bench-$bnch.log" 2>&1
  rc=$?
  summary+=("bench $bnch: rc=$rc $(( $(date +%s) - start ))s")
done

echo "== failures (first lines) =="
for f in "$out"/tests-*.log; do
  [ -f "$f" ] && grep -B2 -A12 -m3 "FAILED" "$f" | head -60
done
echo "== bench tables =="
cat "$out"/*.md 2>/dev/null
echo "== summary ($CUASYNC_COMMIT) =="
cat "$out/gpu.txt"
printf '%s\n' "${summary[@]}"
