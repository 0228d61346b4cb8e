// libFuzzer: the module image checks that run before the driver sees an image (a truncated CUBIN crashed driver 580).
// With no context, an image that passes them stops at "empty context": no driver call is ever made.
#include <cuasync/driver/module.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)cuasync::module::load(cuasync::context_ref{}, std::span(reinterpret_cast<const std::byte*>(data), size));
  } catch (const cuasync::cuda_error&) {
  }
  return 0;
}
