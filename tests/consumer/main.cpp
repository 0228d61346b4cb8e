// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Links against the installed cuasync::driver; runs with or without a GPU.
#include <cuasync/driver.hpp>

#include <cstdio>

int main() {
  try {
    std::printf("consumer: %d CUDA device(s), driver %s\n", cuasync::device::count(),
                cuasync::driver_version_string().c_str());
  } catch (const cuasync::cuda_error& e) {
    std::printf("consumer: no GPU here (%s)\n", e.what());
  }
  return 0;
}
