// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Helpers for [gpu] tests: detection, device 0's context, the test kernels, and the spin-kernel gate.
#include <cuasync/driver.hpp>

#include <atomic>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cuasync::test {

//! True when a driver and at least one device exist; otherwise `reason` says what is missing.
bool gpu_available(std::string* reason);

//! Device 0's primary context, retained once for the process.
context_ref ctx();

//! The test kernels (tests/kernels/test_kernels.cu) as nvcc built them.
std::span<const std::byte> kernels_cubin();
std::span<const std::byte> kernels_ptx();
std::span<const std::byte> kernels_fatbin();
//! The fatbin, loaded once into `ctx()`.
module_ref kernels();
//! The fatbin loaded once into `c` (another device's primary context, for multi-GPU tests).
module_ref kernels(context_ref c);

//! True when at least `n` devices exist; otherwise a Catch2 warning says the test was skipped and why (defined in
//! test_main.cpp: test executables only).
bool devices_at_least(int n);

//! Random bytes (never zeros-only) for copy checks.
std::vector<std::byte> random_bytes(std::size_t n, unsigned seed = 12345);

//! A gate for ordering tests (on any device: the flag is portable pinned memory): `close(stream)` enqueues a kernel that spins until `open()` is called, so work after
//! it on that stream cannot run before the test lets it. The destructor always opens the gate.
class gate {
 public:
  gate();
  ~gate();
  void close(stream_ref s);
  void open();

 private:
  pinned_buffer flag_;
};

}  // namespace cuasync::test
