#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# On the GPU machine: the whole framework suite (pytest: cuasync, PyTorch, CuPy, JAX, asyncio on the default loop and
# uvloop) and the Python benchmark beside PyTorch and CuPy. Writes OUT/pytest.log, OUT/python_bench.{json,md}.
# Usage: scripts/python-gpu.sh OUT [BUILD_DIR]   (BUILD_DIR: the packed build, default build-gpu)
# CUASYNC_FROM_WHEEL=1: the suite runs against BUILD_DIR/wheel/*.whl installed into a fresh venv, not the build's
# library through the source tree's package.
set -uo pipefail
out=$1
build=${2:-build-gpu}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export CUASYNC_COMMIT_FILE=$PWD/$build/commit.txt
status=0
if [ "${CUASYNC_FROM_WHEEL:-0}" = 1 ]; then
  # The suite against the pip wheel that gpu-pack.sh packed, installed into a fresh venv that sees this Python's
  # frameworks (scripts/python-wheel.sh test).
  scripts/python-wheel.sh test "$build"/wheel/cuasync-*.whl "${TMPDIR:-/tmp}/cuasync-wheel-test" -v -rs \
    ${CUASYNC_PYTEST_ARGS:-} 2>&1 | tee "$out/pytest.log" | tail -60
else
  scripts/python-tests.sh "$build/plugins/libcuasync.so" -v -rs ${CUASYNC_PYTEST_ARGS:-} 2>&1 | tee "$out/pytest.log" | tail -60
fi
status=${PIPESTATUS[0]}
if [ "${CUASYNC_PYTHON_BENCH:-1}" != 0 ]; then
  # PyTorch's C++ op into the cache first (a fresh machine has none; `auto` never compiles at import): the bench then
  # measures it, and its report says which op it measured; a failed build is printed here with the compiler's words.
  CUASYNC_LIBRARY=$PWD/$build/plugins/libcuasync.so PYTHONPATH=$PWD/plugins/python timeout 300 \
    python3 -m cuasync.torch build > "$out/torch-ops-build.log" 2>&1 ||
    { echo "!!! PyTorch C++ op build failed (rc $?): the bench measures the Python custom op"; tail -20 "$out/torch-ops-build.log"; }
  CUASYNC_LIBRARY=$PWD/$build/plugins/libcuasync.so python3 bench/python/bench_frameworks.py \
    --json "$out/python_bench.json" --markdown "$out/python_bench.md" ${CUASYNC_BENCH_ARGS:-} || status=1
fi
exit $status
