// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A kernel that writes out of bounds faults the context: the error surfaces at the next synchronising call as a
// cuda_error naming CUDA_ERROR_ILLEGAL_ADDRESS. Runs in a child process (the context is unusable afterwards).
#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "gpu.hpp"

#include <cstdio>

using namespace cuasync;

TEST_CASE("fault child", "[.fault_child]") {
  CUASYNC_CHILD_ONLY();
  stream s = stream::create(test::ctx());
  // An address far outside any allocation.
  launch(s, test::kernels().kernel("write_to"), {.grid = 1, .block = 1}, reinterpret_cast<int*>(0x10), 1);
  try {
    s.synchronize();
    std::printf("CHILD no error\n");
  } catch (const cuda_error& e) {
    std::printf("CHILD cuda_error: %s\n", e.what());
  }
}

TEST_CASE("an out-of-bounds write is a cuda_error naming CUDA_ERROR_ILLEGAL_ADDRESS", "[driver][fault][gpu]") {
  auto r = test::run_child({"fault child"}, {}, std::chrono::seconds(60));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  CHECK_THAT(r.output, Catch::Contains("CHILD cuda_error: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS"));
}
