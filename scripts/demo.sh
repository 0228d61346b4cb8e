#!/usr/bin/env bash
# The main job: set up, build, and run `cuasync info` (the driver, each device and its attributes).
# Without a GPU it says so and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build -DCUASYNC_BUILD_TESTS=OFF -DCUASYNC_BUILD_BENCH=OFF > /dev/null
exec build/tools/cuasync info
