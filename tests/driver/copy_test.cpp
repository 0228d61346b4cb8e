// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/copy.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>

using namespace cuasync;
using test::ctx;
using test::kernels;

namespace {
unsigned long long host_checksum(std::span<const std::byte> d) {
  unsigned long long s = 0;
  for (std::size_t i = 0; i < d.size(); ++i) s += static_cast<unsigned long long>(d[i]) * (i % 251 + 1);
  return s;
}
unsigned long long device_checksum(stream_ref s, device_span d) {
  device_buffer result = device_buffer::allocate(ctx(), 8);
  memset_async(s, result.span(), 0);
  launch(s, kernels().kernel("byte_checksum"), {.grid = 264, .block = 256}, d.as<unsigned char>(),
         static_cast<unsigned long long>(d.size), result.data<unsigned long long>());
  unsigned long long out = 0;
  copy_async(s, std::as_writable_bytes(std::span(&out, 1)), result.span());
  s.synchronize();
  return out;
}
}  // namespace

TEST_CASE("H2D, D2D and D2H round trips are exact on random data", "[driver][copy][gpu]") {
  const std::size_t size = GENERATE(std::size_t{1}, std::size_t{4097}, std::size_t{256} << 20);
  CAPTURE(size);
  stream s = stream::create(ctx());
  const auto src = test::random_bytes(size, static_cast<unsigned>(size));
  pinned_buffer in = pinned_buffer::allocate(ctx(), size), out = pinned_buffer::allocate(ctx(), size);
  std::memcpy(in.get(), src.data(), size);
  std::memset(out.get(), 0, size);
  device_buffer a = device_buffer::allocate(ctx(), size), b = device_buffer::allocate(ctx(), size);
  copy_async(s, a.span(), std::span<const std::byte>(in.bytes()));
  copy_async(s, b.span(), a.span());
  copy_async(s, out.bytes(), b.span());
  s.synchronize();
  CHECK(std::memcmp(out.get(), src.data(), size) == 0);
  CHECK(device_checksum(s, b.span()) == host_checksum(src));
  // Peer copy (here within one device's context: the path is the same API).
  device_buffer c = device_buffer::allocate(ctx(), size);
  copy_peer_async(s, c.span(), ctx(), b.span(), ctx());
  s.synchronize();
  CHECK(device_checksum(s, c.span()) == host_checksum(src));
  // Pageable memory also works (staged by the driver), at an odd offset.
  if (size > 16) {
    std::vector<std::byte> pageable(size);
    copy_async(s, std::span(pageable).subspan(3, size - 3), b.subspan(3, size - 3));
    s.synchronize();
    CHECK(std::memcmp(pageable.data() + 3, src.data() + 3, size - 3) == 0);
  }
}

TEST_CASE("bad copies are refused before they reach the GPU", "[driver][copy][gpu]") {
  stream s = stream::create(ctx());
  device_buffer d = device_buffer::allocate(ctx(), 1024);
  std::vector<std::byte> host(2048);
  SECTION("zero size") {
    CHECK_THROWS_WITH(copy_async(s, d.span(), std::span<const std::byte>(host.data(), 0)),
                      Catch::Contains("zero-size copy"));
  }
  SECTION("out of range") {
    CHECK_THROWS_WITH(copy_async(s, d.span(), std::span<const std::byte>(host)),
                      Catch::Contains("copy of 2048 bytes into a destination of 1024 bytes"));
    CHECK_THROWS_WITH(copy_async(s, std::span(host).first(16), d.span()),
                      Catch::Contains("copy of 1024 bytes into a destination of 16 bytes"));
    CHECK_THROWS_WITH(d.subspan(1000, 100), Catch::Contains("outside a device range of 1024 bytes"));
  }
  SECTION("overlapping device ranges") {
    CHECK_THROWS_WITH(copy_async(s, d.subspan(100, 500), d.subspan(0, 500)), Catch::Contains("overlap"));
    memset32_async(s, d.span(), 0);                          // what is copied is written (initcheck)
    copy_async(s, d.subspan(500, 500), d.subspan(0, 500));  // adjacent is fine
  }
  SECTION("null pointers") {
    CHECK_THROWS_WITH(copy_async(s, device_span{0, 1024}, std::span<const std::byte>(host).first(16)),
                      Catch::Contains("null destination pointer") && Catch::Contains("16 bytes"));
    CHECK_THROWS_WITH(memset_async(s, device_span{0, 16}, 1), Catch::Contains("null destination"));
  }
  SECTION("misaligned 32-bit memset") {
    CHECK_THROWS_WITH(memset32_async(s, d.subspan(2, 8), 1u), Catch::Contains("4-aligned"));
  }
  s.synchronize();
}
