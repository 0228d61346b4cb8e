#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# libFuzzer over the code that reads untrusted input: the kernel package manifest, module images (checked before the
# driver sees them), disk cache entries, size and PTX-version text, the C ABI's argument structs, and traces read back
# by `cuasync trace`.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 30; CI runs this through scripts/test.sh). Installs Debian's
# clang 16 and its libFuzzer runtime when missing. A crash, leak, UB or timeout fails the run; the finding lands in
# build-fuzz/findings/. Each target's statistics (executions, coverage) are printed at its end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
scripts/apt-install.sh fuzz clang-16 libclang-rt-16-dev

CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUASYNC_FUZZ=ON \
  -DCUASYNC_SANITIZE=fuzzer-no-link,address,undefined -DCUASYNC_BUILD_TESTS=OFF -DCUASYNC_BUILD_BENCH=OFF \
  -DCUASYNC_BUILD_EXAMPLES=OFF -DCUASYNC_BUILD_TOOLS=OFF -DCUASYNC_SKIP_COMPONENTS=async_io >/dev/null
targets=(manifest module_image cache_entry cache_size farm_frame c_abi trace_json)
# Every target starts from its seeds in fuzz/corpus/TARGET (libFuzzer exits when a corpus folder is missing, after
# the whole build): say which first.
for t in "${targets[@]}"; do
  if ! compgen -G "fuzz/corpus/$t/*" > /dev/null; then echo "fuzz: no seed inputs in fuzz/corpus/$t" >&2; exit 1; fi
done
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/cuasync_fuzz_}"

mkdir -p build-fuzz/findings
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  echo "fuzz: $t for ${seconds}s"
  if ! build-fuzz/fuzz/cuasync_fuzz_$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix=build-fuzz/findings/$t- "$corpus" fuzz/corpus/$t 2> build-fuzz/$t.log; then
    status=1
    tail -40 build-fuzz/$t.log
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|cov: " build-fuzz/$t.log | tail -4 || true
done
exit $status
