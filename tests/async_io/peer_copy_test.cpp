// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Awaited peer copies between two devices' tracked buffers ([multi_gpu]: skipped with a warning on one device).
#include <cuasync/async_io.hpp>
#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include "gpu.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <cstring>

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("an awaited peer copy is byte-exact, issued from either device", "[async_io][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  auto rt0 = device_runtime::for_device(0), rt1 = device_runtime::for_device(1);
  stream s0 = stream::create(rt0->context()), s1 = stream::create(rt1->context());
  const std::size_t size = (std::size_t{16} << 20) + 5;
  const auto data = test::random_bytes(size, 99);
  tracked_buffer a = tracked_buffer::allocate(*rt0, s0, size), b = tracked_buffer::allocate(*rt1, s1, size);
  tracked_buffer back = tracked_buffer::allocate(*rt0, s0, size);
  runtime::copy_async(*rt0, s0, a, std::span<const std::byte>(data));
  boost::asio::io_context io;
  auto done = boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        co_await async_copy_peer(s0, b, a);     // on the source's device
        co_await async_copy_peer(s0, back, b);  // back again, s0 now the destination's
        co_await async_copy_peer(s1, b, back);  // and on device 1's stream
      },
      boost::asio::use_future);
  io.run();
  done.get();
  std::vector<std::byte> out(size);
  runtime::copy_async(*rt1, s1, std::span<std::byte>(out), b);
  s1.synchronize();
  CHECK(std::memcmp(out.data(), data.data(), size) == 0);
}

TEST_CASE("an awaited peer copy checks sizes in the call", "[async_io][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  auto rt0 = device_runtime::for_device(0), rt1 = device_runtime::for_device(1);
  stream s0 = stream::create(rt0->context()), s1 = stream::create(rt1->context());
  tracked_buffer small = tracked_buffer::allocate(*rt0, s0, 16), big = tracked_buffer::allocate(*rt1, s1, 64);
  try {
    auto f = async_copy_peer(s0, small, big, boost::asio::use_future);
    FAIL("a copy that does not fit was accepted");
  } catch (const cuda_error& e) {
    CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
    CHECK_THAT(std::string(e.what()), Catch::Contains("does not fit"));
  }
  s0.synchronize();
  s1.synchronize();
}
