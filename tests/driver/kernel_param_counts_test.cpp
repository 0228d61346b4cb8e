// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The parameter counts read from module images (driver/src/kernel_param_counts.hpp): what the driver is asked about, so
// kernel lookups make no failing cuFuncGetParamInfo probe. No GPU: the images are the test kernels nvcc built.
#include "../../driver/src/kernel_param_counts.hpp"

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>
#include <string_view>
#include <vector>

using cuasync::image_format;
using cuasync::detail::kernel_param_counts;

namespace {
// The test kernels (tests/kernels/test_kernels.cu) and how many parameters each declares.
const std::vector<std::pair<std::string, std::size_t>> declared = {
    {"empty_kernel", 0}, {"fill_iota", 3}, {"saxpy", 4},         {"add_value", 3}, {"twice_plus_one", 3},
    {"sleep_ns", 1},     {"write_to", 2},  {"byte_checksum", 3}, {"burn", 4},      {"trap_kernel", 0}};

void check_counts(std::span<const std::byte> image, image_format format) {
  const auto counts = kernel_param_counts(image, format);
  for (const auto& [name, n] : declared) {
    INFO(name);
    REQUIRE(counts.count(name) == 1);
    CHECK(counts.at(name) == n);
  }
}
}  // namespace

TEST_CASE("kernel parameter counts come from CUBIN and PTX images", "[driver][module]") {
  SECTION("CUBIN: the KPARAM_INFO records of each .nv.info.<kernel>") {
    check_counts(cuasync::test::kernels_cubin(), image_format::cubin);
  }
  SECTION("PTX: the .params of each .entry") { check_counts(cuasync::test::kernels_ptx(), image_format::ptx); }
  SECTION("fatbin: its uncompressed CUBIN") { check_counts(cuasync::test::kernels_fatbin(), image_format::fatbin); }
  SECTION("any bytes are safe: truncated images give what their intact part says") {
    for (auto [image, format] : {std::pair{cuasync::test::kernels_cubin(), image_format::cubin},
                                 std::pair{cuasync::test::kernels_fatbin(), image_format::fatbin},
                                 std::pair{cuasync::test::kernels_ptx(), image_format::ptx}})
      for (std::size_t cut = 0; cut < image.size(); cut += 97) (void)kernel_param_counts(image.first(cut), format);
    std::vector<std::byte> noise(4096, std::byte{0xff});
    CHECK(kernel_param_counts(noise, image_format::cubin).empty());
    CHECK(kernel_param_counts(noise, image_format::fatbin).empty());
  }
  SECTION("a .nv.info section that does not parse to its end is not trusted") {
    const auto cubin = cuasync::test::kernels_cubin();
    std::vector<std::byte> image(cubin.begin(), cubin.end());
    // saxpy's section, by name (the names table is section e_shstrndx); its first record gets a format that is none.
    const auto* text = reinterpret_cast<const char*>(image.data());
    auto read = [&](std::uint64_t at, auto v) {
      std::memcpy(&v, text + at, sizeof v);
      return v;
    };
    const auto shoff = read(40, std::uint64_t{});
    const auto shentsize = read(58, std::uint16_t{}), shnum = read(60, std::uint16_t{}),
               shstrndx = read(62, std::uint16_t{});
    const auto names = read(shoff + shstrndx * shentsize + 24, std::uint64_t{});
    bool corrupted = false;
    for (std::uint16_t i = 0; i < shnum; ++i) {
      const auto name = read(shoff + i * shentsize, std::uint32_t{});
      if (std::string_view(text + names + name) != ".nv.info.saxpy") continue;
      image[read(shoff + i * shentsize + 24, std::uint64_t{})] = std::byte{0x7f};
      corrupted = true;
    }
    REQUIRE(corrupted);
    const auto after = kernel_param_counts(image, image_format::cubin);
    CHECK(after.count("saxpy") == 0);
    CHECK(after.at("burn") == 4);
  }
}
