#!/usr/bin/env bash
# Set up, build, and run every test (CTest: one Catch2 executable per component, plus the install/consumer test).
# Without a GPU the [gpu] test cases are left out and each executable says how many and why.
set -euo pipefail
cd "$(dirname "$0")/.."
# Headless Chromium renders the trace timeline for CTest trace_timeline_screenshot (tests only: the demo needs none).
scripts/apt-install.sh test chromium
scripts/setup.sh build
cd build
status=0
ctest --output-on-failure -j"$(nproc)" || status=$?
# What each test executable left out (the "gpu: N test cases not run: reason" lines).
grep -h "^gpu: " Testing/Temporary/LastTest.log | sort | uniq -c | sed 's/^ *[0-9]* */  /' || true
cd ..
# The same suites under the host sanitizers, then a short run of every fuzz target (CUASYNC_SANITIZERS=0 skips both,
# e.g. for a quick local run).
if [ "${CUASYNC_SANITIZERS:-1}" != 0 ]; then
  scripts/sanitize.sh || status=$?
  scripts/fuzz.sh "${CUASYNC_FUZZ_SECONDS:-30}" || status=$?
fi
exit $status
