// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: what cuasync reads of a module image before and beside the driver: the checks that run before the driver
// sees an image (a truncated CUBIN crashed driver 580), and the kernel parameter counts read from CUBIN, PTX and
// fatbin images (driver/src/kernel_param_counts.cpp). With no context, an image that passes the checks stops at
// "empty context": no driver call is ever made.
#include <cuasync/driver/module.hpp>

#include "../driver/src/kernel_param_counts.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span image(reinterpret_cast<const std::byte*>(data), size);
  try {
    (void)cuasync::module::load(cuasync::context_ref{}, image);
  } catch (const cuasync::cuda_error&) {
  }
  // Any bytes, read as each format (also those detect_image_format would not call so).
  for (auto format : {cuasync::image_format::cubin, cuasync::image_format::ptx, cuasync::image_format::fatbin})
    (void)cuasync::detail::kernel_param_counts(image, format);
  return 0;
}
