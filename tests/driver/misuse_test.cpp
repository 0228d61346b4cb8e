// Misuse that must be refused with a cuda_error naming the call and the caller's line, never a crash, another
// stream's work or another exception type: empty handles (kernel_ref, module, stream_ref), ranges that wrap, a
// directory given as a module file. The first cases need no driver (each check comes before any driver call); the
// hidden [.simulated] ones run on the simulated libcuda (CTest driver_misuse_simulated).
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/managed_buffer.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/driver/module.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "child_process.hpp"

#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

using namespace cuasync;
using Catch::Contains;
using test::check_call_site;
using test::error_of;

namespace {
// A stream handle that is never given to the driver: the checks below refuse the call before any driver call.
const stream_ref fake_stream(reinterpret_cast<CUstream>(std::uintptr_t{0x5100}), context_ref{});
}  // namespace

TEST_CASE("copies refused for a null pointer or an overlap name the sizes and the stream", "[driver][copy][misuse]") {
  const std::array<std::byte, 8> host{};
  const cuda_error null_dst = error_of([&] { copy_async(fake_stream, device_span{0, 16}, std::span(host)); });
  CHECK_THAT(null_dst.detail(), Contains("null") && Contains("8 bytes") && Contains(fake_stream.describe()));
  const cuda_error null_src = error_of([&] { copy_async(fake_stream, device_span{0x2000, 8}, device_span{0, 8}); });
  CHECK_THAT(null_src.detail(), Contains("null") && Contains("8 bytes") && Contains(fake_stream.describe()));
  const cuda_error overlap =
      error_of([&] { copy_async(fake_stream, device_span{0x2004, 8}, device_span{0x2000, 8}); });
  CHECK_THAT(overlap.detail(), Contains("overlap") && Contains("8 bytes") && Contains(fake_stream.describe()));
}
