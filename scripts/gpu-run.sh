#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The GPU machine's run: every test executable (all [gpu] tests included), the examples, then every benchmark, then
# a short table. Usage (on the GPU machine, with the build folder carried): scripts/gpu-run.sh OUT_DIR [BUILD_DIR]
#   CUASYNC_GPU_TESTS="driver jit" / CUASYNC_GPU_BENCHES="driver" / CUASYNC_GPU_PROBES="completion_probe" narrow what
#   runs; set to "" they skip it (unset: all that are built). CUASYNC_EXAMPLES=0 skips the examples.
# Everything lands in OUT_DIR/results.tgz (logs, bench JSON and markdown) and OUT_DIR/summary.txt, and the demo's
# trace.json and timeline.html in OUT_DIR/demo, and OUT_DIR/progress.txt (each summary line as it happens, and the
# failures of a suite): five files, as the device tool returns at most eight.
set -uo pipefail
out=${1:?usage: gpu-run.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
work=$(mktemp -d)
export CUASYNC_COMMIT=$(cat "$build/commit.txt" 2>/dev/null || echo unknown)
summary=()
mkdir -p "$out"
# Each summary line also lands in OUT/progress.txt at once: a run cut short by the device's limit still says how far
# it got and what each step gave (the summary and results.tgz are written at the end only).
: > "$out/progress.txt"
note() {
  summary+=("$1")
  printf '%s\n' "$1" >> "$out/progress.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$work/gpu.txt" 2>&1 || true
[ -x "$build/tools/cuasync" ] && "$build/tools/cuasync" info > "$work/info.txt" 2>&1

# The README's first command, `cuasync demo` (its trace.json and timeline.html also land in OUT/demo), its --json
# form, and `cuasync doctor`. CUASYNC_GPU_DEMO=0 skips them.
if [ -x "$build/tools/cuasync" ] && [ "${CUASYNC_GPU_DEMO:-1}" != 0 ]; then
  timeout 120 "$build/tools/cuasync" demo --out "$work/demo" > "$work/demo.txt" 2> "$work/demo.err"
  note "cuasync demo: rc=$? $(grep -m1 '^what this run shows' "$work/demo.txt")"
  if grep -q "^diagnostics: no findings" "$work/demo.txt"; then
    note "cuasync demo diagnostics: silent on the default run"
  else
    found=$(grep -oE '^\[[a-z_]+\]' "$work/demo.txt" | tr '\n' ' ')
    note "cuasync demo diagnostics: the default run has findings: $found"
  fi
  # A deliberately host-bound run (one slot): the host-bound diagnostic must fire.
  timeout 120 "$build/tools/cuasync" demo --slots 1 --requests 300 --rounds 1 --out "$work/demo-slots1" \
    > "$work/demo-slots1.txt" 2> "$work/demo-slots1.err"
  note "cuasync demo --slots 1: rc=$? findings: $(grep -oE '^\[[a-z_]+\]' "$work/demo-slots1.txt" | tr '\n' ' ')"
  rm -rf "$work/demo-slots1"
  timeout 120 "$build/tools/cuasync" demo --json --out "$work/demo-json" > "$work/demo.json" 2> "$work/demo-json.err"
  note "cuasync demo --json: rc=$?"
  timeout 60 "$build/tools/cuasync" doctor > "$work/doctor.txt" 2> "$work/doctor.err"
  note "cuasync doctor: rc=$? $(grep -m1 '^verdict' "$work/doctor.txt")"
  timeout 60 "$build/tools/cuasync" doctor --json > "$work/doctor.json" 2>> "$work/doctor.err"
  mkdir -p "$out/demo"
  cp "$work"/demo/trace.json "$work"/demo/timeline.html "$out/demo/" 2> /dev/null
fi

for t in ${CUASYNC_GPU_TESTS-driver jit engine runtime async_io collectives fault_injection plugins}; do
  bin="$build/tests/$t/cuasync_${t}_tests"
  [ -x "$bin" ] || continue
  start=$(date +%s)
  # --durations: each case's time as it ends, so a suite cut short by its timeout names the case it was in (the one
  # after the last line).
  timeout ${CUASYNC_TEST_TIMEOUT:-300} "$bin" --durations yes ${CUASYNC_TEST_ARGS:-} > "$work/tests-$t.log" 2>&1
  rc=$?
  line=$(grep -E "^(All tests passed|test cases:)" "$work/tests-$t.log" | tail -1)
  note "tests $t: rc=$rc $(( $(date +%s) - start ))s  $line"
  if [ "$rc" -ne 0 ]; then
    { grep -B3 -A12 "FAILED" "$work/tests-$t.log" | head -40; echo "-- its last lines:"; tail -4 "$work/tests-$t.log"; } \
      >> "$out/progress.txt"
  fi
done

# The C ABI's conformance suite with its GPU part (a C program that only dlopen()s libcuasync.so).
conformance="$build/tests/plugins/cuasync_conformance"
if [ -x "$conformance" ] && [ "${CUASYNC_GPU_TESTS-plugins}" != "" ]; then
  timeout 120 "$conformance" "$build/plugins/libcuasync.so" --gpu > "$work/tests-c_abi.log" 2>&1
  note "tests c_abi conformance --gpu: rc=$? $(tail -1 "$work/tests-c_abi.log")"
fi

# The soak (docs/reliability.md): resources sampled over long runs; CUASYNC_SOAK_SCALE=0.1 shortens it, 0 skips it.
if [ -x "$build/tests/soak/cuasync_soak" ] && [ "${CUASYNC_SOAK_SCALE:-1}" != 0 ]; then
  start=$(date +%s)
  timeout 300 "$build/tests/soak/cuasync_soak" "${CUASYNC_SOAK_SCALE:-1}" > "$work/soak.log" 2>&1
  note "soak: rc=$? $(( $(date +%s) - start ))s $(tail -1 "$work/soak.log")"
fi

for ex in "$build"/examples/*/example_*; do
  [ "${CUASYNC_EXAMPLES:-1}" = 0 ] && break
  [ -x "$ex" ] || continue
  name=$(basename "$ex")
  # example_c_service dlopens the library it is given (as a framework would): this build's.
  CUASYNC_LIBRARY=${CUASYNC_LIBRARY:-$build/plugins/libcuasync.so} timeout 120 "$ex" > "$work/$name.log" 2>&1
  note "$name: rc=$? $(tail -1 "$work/$name.log")"
done
# Each example beside its raw version, from the logs above (requests/s, or time per batch: larger or smaller is
# better), and the async_io example beside the raw service run with its sizes.
if [ "${CUASYNC_EXAMPLES:-1}" != 0 ]; then
  raw="$build/examples/runtime/example_inference_service_raw"
  [ -x "$raw" ] && timeout 120 "$raw" 65536 400 > "$work/example_inference_service_raw_65536.log" 2>&1
  figure() { grep -oE "\(([0-9.]+) $2\)" "$work/$1.log" 2>/dev/null | tail -1 | grep -oE '[0-9.]+' | head -1; }
  side_by_side() {  # NAME LOG RAW_LOG UNIT higher|lower
    local a b
    a=$(figure "$2" "$4") b=$(figure "$3" "$4")
    if [ -n "$a" ] && [ -n "$b" ]; then
      note "$(awk -v n="$1" -v a="$a" -v b="$b" -v u="$4" -v h="$5" 'BEGIN {
        r = (h == "higher") ? a / b : b / a
        printf "example vs raw: %s %s vs raw %s %s: %.2fx the raw version%s", n, a, b, u, r,
               (r >= 1 ? "" : " (SLOWER)") }')"
    else
      note "example vs raw: $1: no figures (${a:-none} vs ${b:-none})"
    fi
  }
  side_by_side inference_service example_inference_service example_inference_service_raw "req/s" higher
  side_by_side double_buffer example_double_buffer example_double_buffer_raw "us per batch" lower
  side_by_side async_inference_pipeline example_async_inference_pipeline example_inference_service_raw_65536 \
    "req/s" higher
fi
# The tutorial's Python service (docs/tutorial.md): asyncio on PyTorch tensors (needs torch in this python3).
if [ "${CUASYNC_EXAMPLES:-1}" != 0 ] && [ -f "$build/plugins/libcuasync.so" ]; then
  root=$(cd "$(dirname "$0")/.." && pwd)
  PYTHONPATH=$root/plugins/python CUASYNC_LIBRARY=${CUASYNC_LIBRARY:-$build/plugins/libcuasync.so} \
    timeout 300 "${CUASYNC_PYTHON:-python3}" "$root/examples/python/service.py" > "$work/example_python_service.log" 2>&1
  note "example_python_service: rc=$? $(tail -1 "$work/example_python_service.log")"
fi

for bnch in ${CUASYNC_GPU_BENCHES-driver jit runtime async_io c_abi wait_accuracy green replay_await}; do
  bin=$(find "$build/bench" -name "cuasync_${bnch}_bench" -type f | head -1)
  [ -x "$bin" ] || continue
  start=$(date +%s)
  timeout 300 "$bin" "$work" > "$work/bench-$bnch.log" 2>&1
  rc=$?
  note "bench $bnch: rc=$rc $(( $(date +%s) - start ))s"
done
# The compile farm against one thread and threads of one process (256 kernels; jit_farm.md in the tables).
jit_bench="$build/bench/jit/cuasync_jit_bench"
if [ -x "$jit_bench" ] && [[ " ${CUASYNC_GPU_BENCHES-jit} " == *" jit "* ]]; then
  start=$(date +%s)
  timeout 300 "$jit_bench" "$work" farm 256 > "$work/bench-jit_farm.log" 2>&1
  note "bench jit farm: rc=$? $(( $(date +%s) - start ))s"
fi

# Probes: raw-driver figures behind design choices (not cuasync benchmarks), and whether cold paths stall a thread
# that awaits (cold_paths_probe, c_abi_copy_probe: fresh processes). CUASYNC_GPU_PROBES="" skips them.
# pinned_alloc_interference_probe: whether a pinned allocation holds up another thread's driver calls (it does: a
# cuMemHostAlloc keeps them all out, session 22); the C ABI's cold copies are run again with the runtime's pinned
# blocks made by cuMemHostAlloc (CUASYNC_PINNED_BY_REGISTRATION=0), beside the default (registered since session 23).
for probe in ${CUASYNC_GPU_PROBES-completion_probe queue_depth_probe cold_paths_probe c_abi_copy_probe pinned_alloc_interference_probe}; do
  bin=$(find "$build/bench" -name "cuasync_$probe" -type f | head -1)
  [ -n "$bin" ] && [ -x "$bin" ] || continue
  start=$(date +%s)
  args=()  # the C ABI probe dlopens this build's library (its built-in path is this machine's build folder)
  [ "$probe" = c_abi_copy_probe ] && args=("$build/plugins/libcuasync.so")
  timeout 300 "$bin" "${args[@]}" > "$work/probe-$probe.txt" 2>&1
  note "probe $probe: rc=$? $(( $(date +%s) - start ))s"
  if [ "$probe" = c_abi_copy_probe ]; then
    start=$(date +%s)
    CUASYNC_PINNED_BY_REGISTRATION=0 timeout 300 "$bin" "${args[@]}" > "$work/probe-$probe-host-alloc.txt" 2>&1
    note "probe $probe with cuMemHostAlloc'd blocks: rc=$? $(( $(date +%s) - start ))s"
  fi
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
