// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU's "a kernel that never ends is abandoned" (gpu_faults_test.cpp) on the simulated driver, whose
// cuMemFreeHost and cuMemFree wait until the device is idle (as the H200's do: baselines, docs/architecture.md) and
// whose closed gate kernel never ends: runtimes of both libraries, their pageable staging reserved (pinned memory that
// their teardown frees), are torn down while the kernel runs, and the process must end by itself. In a child process
// with a time bound, so a hang fails the case instead of hanging CTest.
#include "c_abi_client.hpp"
#include "child_process.hpp"
#include "exit_watchdog.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <cuasync/driver.hpp>
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace std::chrono_literals;

TEST_CASE("abandon child on the simulated driver", "[.abandon_simulated_child]") {
  CUASYNC_CHILD_ONLY();
  // The framework's objects, left to the process's end as a framework with an endless kernel leaves them (static:
  // reachable, so LeakSanitizer does not count them).
  static auto* kept = new primary_context(primary_context::retain(device::get(0)));
  const context_ref ctx = *kept;
  static auto* s = new stream(stream::create(ctx));
  static auto* gate = new test::sim_gate(ctx);
  const long before = test::simulated_live_pinned();
  // Each runtime reserves pageable staging at creation: cold chunks and gate words, allocated in the background.
  runtime::device_runtime_options reserving;
  reserving.reserve_pageable_staging = true;
  const long per_runtime =
      static_cast<long>(reserving.pageable.cold_chunks * reserving.pageable.cold_copies_reserved) + 4;
  // And each has its context's event pool made ready: a slab of host words, on the grower thread (two pools: the C ABI
  // library carries its own engine).
  const long expected = 2 * (per_runtime + 1);
  auto rt = runtime::device_runtime::create(0, reserving);
  auto c = std::make_unique<test::c_abi_client>(test::c_abi_library(), s->get());  // runtime_create reserves too
  for (int i = 0; i < 1000 && test::simulated_live_pinned() < before + expected; ++i)
    std::this_thread::sleep_for(10ms);
  std::printf("RESERVED %ld pinned blocks\n", test::simulated_live_pinned() - before);
  std::fflush(stdout);  // a child killed at its time bound loses what is buffered
  gate->close(*s);  // never opened: the device never goes idle again
  cuasync_stream_wait_args w{CUASYNC_STREAM_WAIT_ARGS_SIZE, c->stream(), c->completion(1, false)};
  c->check(c->api().stream_wait(&w), "stream_wait");
  std::printf("PENDING %zu completions\n", 1 - c->drain(1, 100ms).size());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& line : c->teardown()) std::printf("TEARDOWN said %s\n", line.c_str());
  c.reset();
  std::printf("TEARDOWN of the C ABI's runtime ok\n");
  std::fflush(stdout);
  rt.reset();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  const deferred_free_stats f = deferred_frees();
  std::printf("TEARDOWN ok in %lld ms (the kernel still runs; %llu frees handed to the reaper, %llu made)\n",
              static_cast<long long>(ms.count()), static_cast<unsigned long long>(f.handed_over),
              static_cast<unsigned long long>(f.done));
  std::fflush(stdout);
  test::arm_exit_watchdog(15s);
  std::printf("CHILD END\n");
  std::fflush(stdout);
}

TEST_CASE("runtimes torn down while a kernel never ends: teardown ends, and so does the process",
          "[fault_injection][abandon][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  const auto r = test::run_child({"abandon child on the simulated driver"}, {}, 40s);
  UNSCOPED_INFO("child output:\n" << r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("RESERVED 26 pinned blocks") != std::string::npos);  // 2 x (8 chunks + 4 gate words + a slab)
  CHECK(r.output.find("PENDING 1 completions") != std::string::npos);
  CHECK(r.output.find("TEARDOWN ok in") != std::string::npos);
  CHECK(r.output.find("CHILD END") != std::string::npos);
  CHECK(r.output.find("EXIT HANG") == std::string::npos);  // the process ended by itself, kernel and all
}
