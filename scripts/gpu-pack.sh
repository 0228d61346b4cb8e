#!/usr/bin/env bash
# Packs what the GPU machine runs from a build folder: executables, shared libraries, commit.txt, with the build's
# layout, without object files, static libraries or the install test (the device tool carries at most 64 MiB).
# Usage: scripts/gpu-pack.sh [BUILD_DIR] [PACK_DIR]   (defaults: build, build-gpu); then carry PACK_DIR and run
# scripts/gpu-run.sh $OUT PACK_DIR there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
pack=${2:-build-gpu}
git rev-parse HEAD > "$build/commit.txt"
rm -rf "$pack"
mkdir -p "$pack"
cp "$build/commit.txt" "$pack/"
(cd "$build" && find . -path ./consumer-test -prune -o -path '*/CMakeFiles' -prune -o -type f \
   \( -perm -u+x -o -name '*.so*' \) -print) | while read -r f; do
  mkdir -p "$pack/$(dirname "$f")"
  cp -p "$build/$f" "$pack/$f"
done
du -sh "$pack"
