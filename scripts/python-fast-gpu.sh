#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# On the GPU machine, one call (~4 min): the framework suite from the wheel with the compiled fast path required
# (cuasync._fast, abi3, on that Python), the GPU tests on ctypes alone, then bench_frameworks.py alternated: fast,
# ctypes (--quick), fast. Leaves OUT/results.tgz and prints the bench tables.
# Usage: OUT=DIR scripts/python-fast-gpu.sh [PACK_DIR]   (PACK_DIR, default build-gpu: plugins/libcuasync.so*,
# plugins/_fast.abi3.so, commit.txt and wheel/*.whl of a build here: DEVELOPERS.md says how to make it)
set -uo pipefail
cd "$(dirname "$0")/.."
pack=${1:-build-gpu}
out=${OUT:?}
r=$out/r
mkdir -p "$r"
export CUASYNC_COMMIT_FILE=$PWD/$pack/commit.txt PYTHONUNBUFFERED=1
lib=$PWD/$pack/plugins/libcuasync.so
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, hasattr(torch.Tensor, '__dlpack_c_exchange_api__'))"
echo "== wheel suite, CUASYNC_PYTHON_FAST=1"
CUASYNC_PYTHON_FAST=1 CUASYNC_FROM_WHEEL=1 CUASYNC_PYTHON_BENCH=0 timeout 110 scripts/python-gpu.sh "$r/wheel" "$pack" \
  > "$r/wheel-run.log" 2>&1
echo "wheel suite rc=$?"; grep -E "fast path|passed|failed|FAILED|Error" "$r/wheel/pytest.log" | tail -12
echo "== gpu tests, CUASYNC_PYTHON_FAST=0"
CUASYNC_PYTHON_FAST=0 CUASYNC_LIBRARY=$lib timeout 60 python3 -m pytest plugins/python/tests/gpu -q -p no:cacheprovider \
  > "$r/ctypes-gpu.log" 2>&1
echo "ctypes gpu rc=$?"; grep -E "passed|failed|FAILED" "$r/ctypes-gpu.log" | tail -8
# PyTorch's C++ op, built into the cache once before the benches (a fresh machine has none, and `auto` never compiles
# at import): its log says why when it does not build, and the bench's report says which op it measured.
echo "== PyTorch C++ op build"
CUASYNC_LIBRARY=$lib PYTHONPATH=$PWD/plugins/python timeout 300 python3 -m cuasync.torch build > "$r/torch-ops-build.log" 2>&1
echo "torch C++ op build rc=$? (log: torch-ops-build.log)"; tail -3 "$r/torch-ops-build.log"
bench() {
  CUASYNC_PYTHON_FAST=$1 CUASYNC_LIBRARY=$lib timeout 45 python3 bench/python/bench_frameworks.py --json "$r/bench-$2.json" \
    --markdown "$r/bench-$2.md" $3 > "$r/bench-$2.log" 2>&1
  echo "bench $2 rc=$?"
}
bench 1 fast-1 ""
bench 0 ctypes-1 --quick
bench 1 fast-2 ""
tar czf "$out/results.tgz" -C "$r" .
for f in fast-1 ctypes-1 fast-2; do echo "== $f"; grep -v "^$" "$r/bench-$f.md" 2>/dev/null || tail -20 "$r/bench-$f.log"; done
