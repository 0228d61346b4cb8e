#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Host sanitizers over the CPU suites (no GPU needed): AddressSanitizer + UndefinedBehaviorSanitizer (leaks included)
# over every test, ThreadSanitizer over the scheduling and completion tests (engine, async_io, the C ABI's fd stress)
# and the trace recorder's threads.
# Any report fails the run. Usage: scripts/sanitize.sh [asan|tsan]... (default: both). Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(asan tsan)

configure() {  # configure DIR SANITIZER
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUASYNC_SANITIZE="$2" -DCUASYNC_BUILD_BENCH=OFF \
        -DCUASYNC_BUILD_EXAMPLES=OFF -DCUASYNC_BUILD_TOOLS=OFF >/dev/null
}

for kind in "${kinds[@]}"; do
  case $kind in
    asan)
      echo "sanitize: AddressSanitizer + UndefinedBehaviorSanitizer over every CPU test"
      configure build-asan address,undefined
      cmake --build build-asan -j"$(nproc)"
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=1"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp"
      (cd build-asan && ctest --output-on-failure -j"$(nproc)")
      ;;
    tsan)
      echo "sanitize: ThreadSanitizer over the engine, async_io, the C ABI, fault injection, the trace recorder, the"
      echo "  traced scenario (the GPU span collector's thread) and the collectives' faults on a fake NCCL"
      configure build-tsan thread
      cmake --build build-tsan -j"$(nproc)" --target cuasync_engine_tests cuasync_async_io_tests cuasync_conformance \
        cuasync_c_api cuasync_inject_each_call cuasync_fault_scenario cuasync_simulated_libcuda cuasync_trace_tests \
        cuasync_collectives_tests cuasync_fake_nccl
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"
      (cd build-tsan &&
        ctest --output-on-failure \
          -R '^(engine|async_io|c_abi_conformance|c_abi_conformance_simulated|fault_injection|trace|traced_scenario|collectives_simulated)$')
      ;;
    *)
      echo "sanitize: unknown kind '$kind' (asan, tsan)" >&2
      exit 2
      ;;
  esac
done
