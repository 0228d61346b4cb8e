// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Each public header compiles on its own (STYLE.md: a header is self-contained); this file includes them one by one
// in separate namespaces of inclusion order, the first of each being compiled first in its own test file as well.
#include <cuasync/driver/fd_passing.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/host_registration.hpp>
#include <cuasync/driver/managed_buffer.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/library.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <type_traits>

TEST_CASE("owners are move-only and derive from their refs", "[driver]") {
  STATIC_REQUIRE(std::is_base_of_v<cuasync::stream_ref, cuasync::stream>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::event_ref, cuasync::event>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::module_ref, cuasync::module>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::memory_pool_ref, cuasync::memory_pool>);
  STATIC_REQUIRE(std::is_base_of_v<cuasync::context_ref, cuasync::primary_context>);
  STATIC_REQUIRE(!std::is_copy_constructible_v<cuasync::stream>);
  STATIC_REQUIRE(!std::is_copy_constructible_v<cuasync::event>);
  STATIC_REQUIRE(!std::is_copy_constructible_v<cuasync::device_buffer>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cuasync::stream>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<cuasync::pinned_buffer>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cuasync::stream_ref>);
  cuasync::stream moved_from;
  CHECK_FALSE(moved_from);
  CHECK(moved_from.get() == nullptr);
}

TEST_CASE("image formats are recognised from their first bytes", "[driver][module]") {
  using cuasync::image_format;
  const char elf[] = "\x7f" "ELF....";
  const char ptx[] = "//\n.version 9.0\n.target sm_90\n";
  const char junk[] = "this is not a CUDA image";
  auto fmt = [](const char* s, std::size_t n) {
    return cuasync::detect_image_format(std::as_bytes(std::span(s, n)));
  };
  CHECK(fmt(elf, sizeof elf) == image_format::cubin);
  CHECK(fmt(ptx, sizeof ptx) == image_format::ptx);
  CHECK(fmt(junk, sizeof junk) == image_format::unknown);
  const unsigned char fatbin[] = {0x50, 0xED, 0x55, 0xBA, 0, 0, 0, 0};
  CHECK(cuasync::detect_image_format(std::as_bytes(std::span(fatbin))) == image_format::fatbin);
}

TEST_CASE("a device_span refuses sub-ranges outside it", "[driver][memory]") {
  cuasync::device_span s{0x1000, 100};
  CHECK(s.subspan(10, 90).size == 90);
  CHECK(s.subspan(10, 90).ptr == 0x100a);
  CHECK_THROWS_WITH(s.subspan(10, 91), Catch::Contains("outside a device range of 100 bytes"));
  CHECK_THROWS_AS(s.subspan(101, 0), cuasync::cuda_error);
}

TEST_CASE("truncated and foreign images are refused before the driver sees them", "[driver][module]") {
  // No GPU needed: the structure of an image is checked before anything else (a truncated CUBIN can crash the
  // driver), so these fail with INVALID_IMAGE even without a context.
  auto cubin = cuasync::test::kernels_cubin();
  auto fatbin = cuasync::test::kernels_fatbin();
  for (std::size_t keep : {std::size_t{40}, cubin.size() / 3, cubin.size() - 1}) {
    CAPTURE(keep);
    try {
      cuasync::module::load(cuasync::context_ref{}, cubin.first(keep), "truncated.cubin");
      FAIL("no throw");
    } catch (const cuasync::cuda_error& e) {
      CHECK(e.result() == CUDA_ERROR_INVALID_IMAGE);
      CHECK_THAT(e.what(), Catch::Contains("CUBIN image 'truncated.cubin'") && Catch::Contains("is corrupt"));
    }
  }
  CHECK_THROWS_WITH(cuasync::module::load(cuasync::context_ref{}, fatbin.first(fatbin.size() / 2), "half.fatbin"),
                    Catch::Contains("fatbin payload extends past the image"));
  std::vector<std::byte> elf(cubin.begin(), cubin.end());
  elf[18] = std::byte{62};  // EM_X86_64
  CHECK_THROWS_WITH(cuasync::module::load(cuasync::context_ref{}, elf, "host.o"),
                    Catch::Contains("another machine than CUDA"));
  // An intact image passes the structural check and only then meets the missing context.
  CHECK_THROWS_WITH(cuasync::module::load(cuasync::context_ref{}, cubin, "ok.cubin"), Catch::Contains("empty context"));
}
