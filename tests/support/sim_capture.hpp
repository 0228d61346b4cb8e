// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// For the capture tests on the simulated driver (tests/fake_driver/entry_capture.cpp): the PTX of the u32 kernels it
// runs by name (sim_kernels.cpp: no-ops on any other driver, so the cases start with CUASYNC_SIMULATED_ONLY()), and a
// stream's capture status as the driver says it.
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/stream.hpp>

#include <catch2/catch.hpp>

namespace cuasync::test {

inline constexpr char sim_u32_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_fill_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";

inline CUstreamCaptureStatus capture_status(stream_ref s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  REQUIRE(detail::driver().cuStreamIsCapturing(s.get(), &st) == CUDA_SUCCESS);
  return st;
}

}  // namespace cuasync::test
