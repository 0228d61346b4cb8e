#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs the Python package's pytest suite (plugins/python/tests) against a libcuasync.so: everywhere its no-GPU part
# (import, errors without a driver, the asyncio plumbing on host completions, argument checks); where a CUDA device
# is, also tests/gpu/ (cuasync alone, PyTorch, CuPy, JAX: each skipped with its reason when not installed).
# Usage: scripts/python-tests.sh LIBCUASYNC [pytest arguments...]
# The interpreter: $CUASYNC_PYTHON, else the first of python3, /usr/bin/python3 that has pytest (Debian's
# python3-pytest in CI). Exits 77 (CTest: skipped) when none has it.
set -uo pipefail
lib=$(realpath "$1")
shift
cd "$(dirname "$0")/.."
python=""
for p in ${CUASYNC_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import pytest" 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  echo "python-tests: no python3 with pytest (apt-get install python3-pytest); skipped"
  exit 77
fi
timeout_args=()
"$python" -c "import pytest_timeout" 2>/dev/null && timeout_args=(--timeout=600)
CUASYNC_LIBRARY=$lib exec "$python" -m pytest plugins/python/tests -q -p no:cacheprovider "${timeout_args[@]}" "$@"
