// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Each public header compiles on its own (STYLE.md): the umbrella header last, the others first in their test files.
#include <cuasync/jit/nvrtc_identity.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/options.hpp>
#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit.hpp>

#include <catch2/catch.hpp>

#include <type_traits>

TEST_CASE("jit errors are cuda_errors", "[jit]") {
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::compile_error>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::nvrtc_not_found_error>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::ptx_too_new_error>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::cache_error>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::farm_worker_error>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::cuda_error, cuasync::jit::unsupported_architecture_error>);
  CHECK(cuasync::jit::cache_key{1, 2}.hex() == "00000000000000020000000000000001");
}
