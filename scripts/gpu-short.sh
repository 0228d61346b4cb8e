#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# One short GPU call for when device time is scarce (failed starts cost 90-180 s of a session's 1,800): what the
# last changes need seen, most telling first, each step cut to the time left of BUDGET_S so the call always ends and
# returns what it measured. 1. the driver bench (tracing and its floors, the flight recorder and its floors); 2.
# what the driver answers after a fault (the completion probe's part 8) and the fault suite (its "host word stands
# alone" case, alone); 3. staged copies: the 64 MiB trace and the runtime bench's pageable rows four times (the
# defaults beside the caller waiting without copying and the other chunk size in a ring of the same bytes), with the async_io bench's closed loops (balanced
# against an event beside each word) between; 4. `cuasync demo`'s verdict; 5. the other [gpu] suites but jit and collectives, and
# the C conformance suite; 6. the C ABI bench; 7. the driver bench again. Writes OUT_DIR/progress.txt (the summary, printed
# last) and OUT_DIR/results.tgz (every log and table).
# Usage (GPU machine): scripts/gpu-short.sh OUT_DIR PACK_DIR [BUDGET_S=400]. Pack first (here):
#   CUASYNC_PACK_TGZ=build-carry scripts/gpu-pack.sh build build-gpu
# carry ["build-carry"] and run: tar -xzf build-carry/gpu.tgz && scripts/gpu-short.sh $OUT build-gpu 400
set -u
out=${1:?usage: gpu-short.sh OUT_DIR PACK_DIR [BUDGET_S]}
B=${2:?usage: gpu-short.sh OUT_DIR PACK_DIR [BUDGET_S]}
start=$(date +%s)
deadline=$((start + ${3:-400}))
W=$out/w
P=$out/progress.txt
mkdir -p "$W"
: >"$P"
export CUASYNC_COMMIT=$(cat "$B/commit.txt" 2>/dev/null || echo unknown)
export CUASYNC_TEARDOWN_ROUNDS=100
say() { echo "$*" >>"$P"; }
# step NAME LIMIT_S COMMAND...: runs it with the smaller of LIMIT_S and the time left; one summary line.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - $(date +%s) - 5))
  if [ "$left" -lt 15 ]; then
    say "SKIP $name (no time left)"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$W/$name.log" 2>&1
  local rc=$?
  say "$name rc=$rc $(($(date +%s) - t0))s | $(grep -E '^(All tests passed|test cases:|conformance:)' "$W/$name.log" | tail -1)"
}
say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) commit $CUASYNC_COMMIT"
driver_bench() {
  mkdir -p "$W/d$1"
  CUASYNC_BENCH_SAMPLES=$W/samples-d$1.txt step bench-driver-$1 75 "$B/bench/driver/cuasync_driver_bench" "$W/d$1"
  grep -iE "flight|trac" "$W/d$1/driver.md" 2>/dev/null | cut -c1-230 >>"$P"
}
driver_bench 1
# What the driver answers after a fault (the probe's part 8, ~1 s): can one query per context be the fault check?
# The fault suite's "host word stands alone" case says the same through the engine.
step fault-probe 20 "$B/bench/async_io/cuasync_completion_probe" 8
grep -E "^(cu|host word)" "$W/fault-probe.log" | sed "s/^/fault: /" >>"$P"
step tests-word-alone-fault 60 "$B/tests/fault_injection/cuasync_fault_injection_tests" \
  "a fault reaches a wait whose host word stands alone*"  # no comma: Catch2 splits a filter there
step staged-trace 40 "$B/bench/runtime/cuasync_staged_sweep_probe" trace 64
grep -m4 -E "^(pinned|staged) " "$W/staged-trace.log" | cut -c1-130 >>"$P"
for i in 1 2; do
  for r in a b; do
    mkdir -p "$W/rt-$i$r"
    step bench-pageable-$i$r 60 "$B/bench/runtime/cuasync_runtime_bench" "$W/rt-$i$r" pageable
    grep -E "(64 MiB|1024 MiB).*(staged vs the pinned|no half chunks|in the ring)" "$W/rt-$i$r/runtime.md" 2>/dev/null |
      cut -c1-180 >>"$P"
  done
  # The closed loops (throughput part only): balanced (words alone) against an event beside each word, the raw host-word loop and Asio's.
  [ "$i" = 1 ] || continue
  mkdir -p "$W/a1"
  CUASYNC_BENCH_ONLY=throughput step bench-async_io 110 "$B/bench/async_io/cuasync_async_io_bench" "$W/a1"
  grep -E "(balanced|words alone off\)) \|.*(host word|Asio)|Asio coroutines on host words( \(64|, a capture)" \
    "$W/a1/async_io.md" 2>/dev/null | cut -c1-200 >>"$P"
done
# The README's first command: its one-line verdict (time per request against the bound under its load).
step demo 45 "$B/tools/cuasync" demo --out "$W/demo"
grep -m1 '^what this run shows' "$W/demo.log" | cut -c1-250 >>"$P"
for t in engine driver runtime async_io fault_injection trace; do
  step tests-$t 120 "$B/tests/$t/cuasync_${t}_tests"
done
step conformance 60 "$B/tests/plugins/cuasync_conformance" "$B/plugins/libcuasync.so" --gpu
mkdir -p "$W/c1"
step bench-cabi 40 "$B/bench/plugins/cuasync_c_abi_bench" "$W/c1"
grep -h "^| launch" "$W/c1/c_abi.md" 2>/dev/null | cut -c1-200 >>"$P"
driver_bench 2
tar -C "$W" -czf "$out/results.tgz" . && rm -rf "$W"
say "done in $(($(date +%s) - start))s"
cat "$P"
