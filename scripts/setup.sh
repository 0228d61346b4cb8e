#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs what cuasync builds with, only what is missing (Debian 12 packages; the CUDA 13 toolkit's headers and
# nvcc are expected under /usr/local/cuda, as on every machine of this project), then configures and builds.
# Usage: scripts/setup.sh BUILD_DIR [cmake options...]
set -euo pipefail
build_dir=${1:-build}
shift || true

"$(dirname "$0")/apt-install.sh" setup cmake g++ make libboost1.81-dev catch2 libxxhash-dev libcli11-dev python3-pytest python3-uvloop python3-dev

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda_home/include/cuda.h" ]; then
  echo "setup: $cuda_home/include/cuda.h not found: install the CUDA 13 toolkit or set CUDA_HOME" >&2
  exit 1
fi
export PATH="$cuda_home/bin:$PATH"

echo "setup: configuring $build_dir" >&2
cmake -S "$(dirname "$0")/.." -B "$build_dir" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} "$@" >/dev/null
# CUASYNC_BUILD_TARGET names one target to build (the demo builds only the command); unset, everything.
echo "setup: building ${CUASYNC_BUILD_TARGET:-everything} in $build_dir (a few minutes on 2 cores)" >&2
cmake --build "$build_dir" -j"$(nproc)" ${CUASYNC_BUILD_TARGET:+--target "$CUASYNC_BUILD_TARGET"}
