#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Packs what the GPU machine runs from a build folder: executables, shared libraries, commit.txt, with the build's
# layout, without object files, static libraries or the install and wheel tests (the device tool carries at most
# 64 MiB), and the pip wheel in PACK_DIR/wheel when there is one.
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [PACK_DIR]   (defaults: build, build-gpu); then carry PACK_DIR and run
# scripts/gpu-run.sh $OUT PACK_DIR there. The whole build no longer fits one call (74 MiB at 1.2.0): CUASYNC_PACK_SKIP
# is an extended regular expression of paths to leave out, e.g. '^\./bench/' for a test run and
# '^\./(tests/(async_io|collectives|jit|trace|allocations|callgrind|soak)|examples)/' for a bench run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pack=${2:-build-gpu}
git rev-parse HEAD > "$build/commit.txt"
rm -rf "$pack"
mkdir -p "$pack"
cp "$build/commit.txt" "$pack/"
(cd "$build" && find . -path ./consumer-test -prune -o -path ./wheel-test -prune -o -path '*/CMakeFiles' -prune -o \
   \( -type f \( -perm -u+x -o -name '*.so*' \) -o -type l -name '*.so*' \) -print) |
  grep -Ev "${CUASYNC_PACK_SKIP:-^$}" | while read -r f; do
  mkdir -p "$pack/$(dirname "$f")"
  cp -P -p "$build/$f" "$pack/$f"  # -P: libcuasync.so -> .so.1 -> .so.1.x.y stay links (they travel as links)
done
# The pip wheel, when CTest python_wheel (or scripts/python-wheel.sh build) made one: scripts/python-wheel.sh test
# installs it there.
if ls "$build"/wheel-test/dist/*.whl >/dev/null 2>&1; then
  mkdir -p "$pack/wheel"
  cp -p "$build"/wheel-test/dist/*.whl "$pack/wheel/"
fi
du -sh "$pack"
# CUASYNC_PACK_TGZ=DIR: also DIR/gpu.tgz, the pack compressed (the whole build, 105 MiB at 1.2.0, is ~42 MiB so):
# carry DIR and run `tar -xzf DIR/gpu.tgz` first on the GPU machine, and no CUASYNC_PACK_SKIP is needed.
if [ -n "${CUASYNC_PACK_TGZ:-}" ]; then
  mkdir -p "$CUASYNC_PACK_TGZ"
  tar -czf "$CUASYNC_PACK_TGZ/gpu.tgz" "$pack"
  du -sh "$CUASYNC_PACK_TGZ/gpu.tgz"
fi
