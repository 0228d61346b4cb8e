#!/usr/bin/env bash
# The main job: set up, build, and run `cuasync demo`: the seed's §16 inference service as coroutines on the runtime,
# with JIT-compiled kernels, on the default GPU. It prints the JIT cache at work (cold compile, memory and disk hits),
# requests/s and latency p50/p99 pipelined and serial, the overlap summary and the diagnostics, and writes trace.json
# and timeline.html to out/demo (or CUASYNC_DEMO_OUT; options after the script's name go to the demo, e.g.
# --slots 2). Without a GPU it still JIT-compiles the kernels, says "no GPU: <reason>" and exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build -DCUASYNC_BUILD_TESTS=OFF -DCUASYNC_BUILD_BENCH=OFF > /dev/null
exec build/tools/cuasync demo --out "${CUASYNC_DEMO_OUT:-out/demo}" "$@"
