#include <cuasync/runtime/memcpy_team.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>

TEST_CASE("the memcpy team copies every byte at odd sizes and offsets", "[runtime][staged]") {
  cuasync::runtime::memcpy_team team(4);
  CHECK(team.size() == 4);
  const auto src = cuasync::test::random_bytes((9 << 20) + 64, 99);
  for (std::size_t size : {std::size_t{1}, std::size_t{300}, std::size_t{(256 << 10) + 5}, std::size_t{(9 << 20) + 7}}) {
    for (std::size_t src_off : {0, 3}) {
      for (std::size_t dst_off : {0, 5, 16}) for (bool streaming : {false, true}) {
        CAPTURE(size, src_off, dst_off, streaming);
        std::vector<std::byte> dst(size + 48, std::byte{0x7e});
        team.copy(dst.data() + dst_off, src.data() + src_off, size, streaming);
        REQUIRE(std::memcmp(dst.data() + dst_off, src.data() + src_off, size) == 0);
        if (dst_off) REQUIRE(dst[dst_off - 1] == std::byte{0x7e});
        REQUIRE(dst[dst_off + size] == std::byte{0x7e});
      }
    }
  }
}
