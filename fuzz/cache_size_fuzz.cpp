// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: NVRTC-side option handling that reads text from the environment: the disk cache's size
// (CUASYNC_CACHE_SIZE, "512M", "2G") and the PTX ISA read from a compiled program's text.
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/target.hpp>

#include <cuasync/driver/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)cuasync::jit::detail::parse_cache_size(text, std::source_location::current());
  } catch (const cuasync::cuda_error&) {
  }
  (void)cuasync::jit::parse_ptx_isa(text);
  return 0;
}
