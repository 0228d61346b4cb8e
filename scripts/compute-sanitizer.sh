#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# compute-sanitizer's four tools (memcheck with leak checking, racecheck, synccheck, initcheck) over the [gpu] test
# cases and the C conformance suite, on the GPU machine; prints a table (tool, suite, reports, of which API errors by
# call, leaks, tests, seconds) into OUT_DIR/compute-sanitizer.md, with every log beside it.
# Left out, and counted: test cases tagged [concurrent] (they need two kernels at once, which the sanitizer
# serializes), [timing] (wall-clock bounds, thousands of rounds), [fault] (they fault on purpose) and [api_error]
# (they make a driver call fail on purpose: a missing kernel, an allocation past a cap, a destroyed context); the
# conformance suite runs without its final fault (CUASYNC_NO_FAULT=1).
# Usage: scripts/compute-sanitizer.sh OUT_DIR [BUILD_DIR]   (CUASYNC_SANITIZER_TOOLS / _SUITES narrow it)
set -uo pipefail
out=${1:?usage: compute-sanitizer.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
cs=$(command -v compute-sanitizer) || { echo "compute-sanitizer not found" >&2; exit 2; }
filter='[gpu]~[concurrent]~[timing]~[fault]~[api_error]'

# One suite, its tools in turn; the suites run at once (one process each on the GPU), each writing its rows.
run_suite() {
  local suite=$1 cmd
  if [ "$suite" = c_abi ]; then
    cmd=(env CUASYNC_NO_FAULT=1 "$build/tests/plugins/cuasync_conformance" "$build/plugins/libcuasync.so" --gpu)
  else
    local bin="$build/tests/$suite/cuasync_${suite}_tests"
    [ -x "$bin" ] || return 0
    cmd=("$bin" "$filter")
    local n
    n=$("$bin" --list-tests '[gpu][concurrent],[gpu][timing],[gpu][fault],[gpu][api_error]' 2>/dev/null |
        grep -oE "^[0-9]+ matching test case" | grep -oE "^[0-9]+")
    echo "$suite: $n [gpu] test cases left out ([concurrent], [timing], [fault], [api_error])" > "$out/left-out-$suite.txt"
  fi
  for tool in ${CUASYNC_SANITIZER_TOOLS-memcheck racecheck synccheck initcheck}; do
    local extra=() log="$out/$tool-$suite.log" start rc secs reports tests
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    start=$(date +%s)
    timeout "${CUASYNC_SANITIZER_TIMEOUT:-240}" "$cs" --tool "$tool" "${extra[@]}" --print-limit 20 "${cmd[@]}" \
      > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    reports=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | grep -oE "[0-9]+ (errors|hazards)" | head -1)
    [ -z "$reports" ] && reports="no summary"
    # API errors (a driver call returning an error: the tests of error paths provoke them on purpose; see
    # docs/reliability.md), by call, apart from the memory errors and leaks.
    local api leaks
    api=$(grep -oE "on CUDA API call to [A-Za-z_0-9]+" "$log" | awk '{print $NF}' | sort | uniq -c |
          awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')
    leaks=$(grep -oE "LEAK SUMMARY: [0-9]+ bytes leaked in [0-9]+ allocations" "$log" | sed 's/LEAK SUMMARY: //')
    tests=$(grep -E "^(All tests passed|test cases:|conformance:)" "$log" | tail -1)
    [ $rc -eq 124 ] && tests="TIMED OUT after ${secs}s"
    echo "| $tool | $suite | $reports | ${api:--} | ${leaks:--} | $tests | $secs |" >> "$out/rows-$suite.txt"
  done
}

suites=(${CUASYNC_SANITIZER_SUITES-driver jit runtime async_io c_abi})
for suite in "${suites[@]}"; do run_suite "$suite" & done
wait

{
  echo "| tool | suite | reports (all) | of which API errors, by call | leaks | tests | s |"
  echo "|---|---|---|---|---|---|---|"
  for suite in "${suites[@]}"; do cat "$out/rows-$suite.txt" 2>/dev/null; done
  echo
  cat "$out"/left-out-*.txt 2>/dev/null
} | tee "$out/compute-sanitizer.md"
