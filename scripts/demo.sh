#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The main job: set up, build, and run `cuasync demo`: an inference service (CPU preprocess -> H2D -> kernel -> D2H ->
# CPU check) as coroutines on the runtime, with JIT-compiled kernels, on the default GPU. It prints the JIT cache at
# work (cold compile, memory and disk hits), requests/s and latency p50/p99 pipelined and serial, the overlap summary
# and the diagnostics, and writes trace.json and timeline.html to out/demo (or CUASYNC_DEMO_OUT; options after the
# script's name go to the demo, e.g. --slots 2 or --slots=2). Without a GPU it still JIT-compiles the kernels,
# says "no usable GPU: <reason>" once and exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."
# The demo needs only the `cuasync` command: build that target alone, in the same build/ folder the tests use, and
# leave the folder's options as they are, so scripts/test.sh before or after this still builds and runs every test.
echo "demo: building the cuasync command (a few minutes on 2 cores; the build's lines follow)" >&2
CUASYNC_BUILD_TARGET=cuasync_tool scripts/setup.sh build >&2
exec build/tools/cuasync demo --out "${CUASYNC_DEMO_OUT:-out/demo}" "$@"
