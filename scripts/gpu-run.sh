#!/usr/bin/env bash
# The GPU machine's run: every test executable (all [gpu] tests included), the examples, then every benchmark, then
# a short table. Usage (on the GPU machine, with the build folder carried): scripts/gpu-run.sh OUT_DIR [BUILD_DIR]
#   CUASYNC_GPU_TESTS="driver jit" / CUASYNC_GPU_BENCHES="driver" / CUASYNC_GPU_PROBES="completion_probe" narrow what
#   runs; set to "" they skip it (unset: all that are built). CUASYNC_EXAMPLES=0 skips the examples.
# Everything lands in OUT_DIR/results.tgz (logs, bench JSON and markdown) and OUT_DIR/summary.txt, and the demo's
# trace.json and timeline.html in OUT_DIR/demo: four files, as the device tool returns at most eight.
set -uo pipefail
out=${1:?usage: gpu-run.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
work=$(mktemp -d)
export CUASYNC_COMMIT=$(cat "$build/commit.txt" 2>/dev/null || echo unknown)
summary=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$work/gpu.txt" 2>&1 || true
[ -x "$build/tools/cuasync" ] && "$build/tools/cuasync" info > "$work/info.txt" 2>&1

# The README's first command, `cuasync demo` (its trace.json and timeline.html also land in OUT/demo), its --json
# form, and `cuasync doctor`. CUASYNC_GPU_DEMO=0 skips them.
if [ -x "$build/tools/cuasync" ] && [ "${CUASYNC_GPU_DEMO:-1}" != 0 ]; then
  timeout 120 "$build/tools/cuasync" demo --out "$work/demo" > "$work/demo.txt" 2> "$work/demo.err"
  summary+=("cuasync demo: rc=$? $(grep -m1 'pipelined / serial' "$work/demo.txt")")
  timeout 120 "$build/tools/cuasync" demo --json --out "$work/demo-json" > "$work/demo.json" 2> "$work/demo-json.err"
  summary+=("cuasync demo --json: rc=$?")
  timeout 60 "$build/tools/cuasync" doctor > "$work/doctor.txt" 2> "$work/doctor.err"
  summary+=("cuasync doctor: rc=$? $(grep -m1 '^verdict' "$work/doctor.txt")")
  timeout 60 "$build/tools/cuasync" doctor --json > "$work/doctor.json" 2>> "$work/doctor.err"
  mkdir -p "$out/demo"
  cp "$work"/demo/trace.json "$work"/demo/timeline.html "$out/demo/" 2> /dev/null
fi

for t in ${CUASYNC_GPU_TESTS-driver jit engine runtime async_io collectives fault_injection plugins}; do
  bin="$build/tests/$t/cuasync_${t}_tests"
  [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout ${CUASYNC_TEST_TIMEOUT:-300} "$bin" ${CUASYNC_TEST_ARGS:-} > "$work/tests-$t.log" 2>&1
  rc=$?
  line=$(grep -E "^(All tests passed|test cases:)" "$work/tests-$t.log" | tail -1)
  summary+=("tests $t: rc=$rc $(( $(date +%s) - start ))s  $line")
done

# The C ABI's conformance suite with its GPU part (a C program that only dlopen()s libcuasync.so).
conformance="$build/tests/plugins/cuasync_conformance"
if [ -x "$conformance" ] && [ "${CUASYNC_GPU_TESTS-plugins}" != "" ]; then
  timeout 120 "$conformance" "$build/plugins/libcuasync.so" --gpu > "$work/tests-c_abi.log" 2>&1
  summary+=("tests c_abi conformance --gpu: rc=$? $(tail -1 "$work/tests-c_abi.log")")
fi

# The soak (docs/reliability.md): resources sampled over long runs; CUASYNC_SOAK_SCALE=0.1 shortens it, 0 skips it.
if [ -x "$build/tests/soak/cuasync_soak" ] && [ "${CUASYNC_SOAK_SCALE:-1}" != 0 ]; then
  start=$(date +%s)
  timeout 300 "$build/tests/soak/cuasync_soak" "${CUASYNC_SOAK_SCALE:-1}" > "$work/soak.log" 2>&1
  summary+=("soak: rc=$? $(( $(date +%s) - start ))s $(tail -1 "$work/soak.log")")
fi

for ex in "$build"/examples/*/example_*; do
  [ "${CUASYNC_EXAMPLES:-1}" = 0 ] && break
  [ -x "$ex" ] || continue
  name=$(basename "$ex")
  timeout 120 "$ex" > "$work/$name.log" 2>&1
  summary+=("$name: rc=$? $(tail -1 "$work/$name.log")")
done

for bnch in ${CUASYNC_GPU_BENCHES-driver jit runtime async_io c_abi}; do
  bin=$(find "$build/bench" -name "cuasync_${bnch}_bench" -type f | head -1)
  [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout 300 "$bin" "$work" > "$work/bench-$bnch.log" 2>&1
  rc=$?
  summary+=("bench $bnch: rc=$rc $(( $(date +%s) - start ))s")
done

# Probes: raw-driver figures behind design choices (not cuasync benchmarks). CUASYNC_GPU_PROBES="" skips them.
for probe in ${CUASYNC_GPU_PROBES-completion_probe queue_depth_probe}; do
  bin=$(find "$build/bench" -name "cuasync_$probe" -type f | head -1)
  [ -n "$bin" ] && [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout 300 "$bin" > "$work/probe-$probe.txt" 2>&1
  summary+=("probe $probe: rc=$? $(( $(date +%s) - start ))s")
done

{
  echo "== failures (first lines) =="
  for f in "$work"/tests-*.log; do
    [ -f "$f" ] && grep -B3 -A10 "FAILED" "$f" | head -50
  done
  for f in demo.txt doctor.txt; do
    [ -f "$work/$f" ] && { echo "== $f =="; cat "$work/$f"; }
  done
  echo "== bench tables =="
  cat "$work"/*.md 2>/dev/null
  [ -f "$work/soak.log" ] && { echo "== soak =="; grep -E "^(#|soak|.*growth)" "$work/soak.log"; }
  echo "== summary ($CUASYNC_COMMIT) =="
  cat "$work/gpu.txt"
  printf '%s\n' "${summary[@]}"
} > "$work/summary.txt"
mkdir -p "$out"
tar -C "$work" -czf "$out/results.tgz" .
cp "$work/summary.txt" "$out/summary.txt"
cat "$out/summary.txt"
