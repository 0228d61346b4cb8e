#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Set up, build, and run every test (CTest: one Catch2 executable per component, plus the install/consumer test).
# Without a GPU the [gpu] test cases are left out and each executable says how many and why.
set -euo pipefail
cd "$(dirname "$0")/.."
# Headless Chromium renders the trace timeline for CTest trace_timeline_screenshot; Doxygen builds the API reference
# for CTest api_reference_cpp; pkg-config, the wheel's builder and venv serve CTest install_consumer and python_wheel;
# valgrind counts instructions for CTest callgrind_awaited_op (tests only: the demo needs none of them).
scripts/apt-install.sh test chromium doxygen pkgconf python3-build python3-setuptools python3-wheel python3-venv \
  valgrind
# Tests and benches on explicitly: a build/ folder configured by anyone else (scripts/demo.sh, a developer) keeps
# whatever other options it has, but never leaves the tests out.
scripts/setup.sh build -DCUASYNC_BUILD_TESTS=ON -DCUASYNC_BUILD_BENCH=ON -DCUASYNC_BUILD_TOOLS=ON
cd build
status=0
# --no-tests=error: a build that registered no test fails here instead of passing with "No tests were found".
set +e
ctest --output-on-failure --no-tests=error -j"$(nproc)" 2>&1 | tee ctest.out
status=${PIPESTATUS[0]}
set -e
ran=$(sed -n 's/.*tests failed out of \([0-9][0-9]*\).*/\1/p' ctest.out | tail -n 1)
echo "test: CTest ran ${ran:-no} tests (status $status)"
if [ -z "$ran" ] || [ "$ran" -eq 0 ]; then echo "test: no test ran: that is a failure" >&2; status=1; fi
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
