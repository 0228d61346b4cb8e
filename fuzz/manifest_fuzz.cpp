// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: the kernel package manifest parser. Any text is an error (cuda_error) or a package, never a crash.
#include <cuasync/jit/kernel_package.hpp>

#include <cuasync/driver/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    // The files a manifest names are read from fuzz/package (a source and a header to find).
    (void)cuasync::jit::kernel_package::parse(std::string_view(reinterpret_cast<const char*>(data), size),
                                              CUASYNC_FUZZ_PACKAGE_DIR);  // fuzz/package
  } catch (const cuasync::cuda_error&) {
  }
  return 0;
}
