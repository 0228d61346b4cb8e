// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/memory_pool.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <cstring>
#include <numeric>

using namespace cuasync;
using test::ctx;
using test::kernels;

TEST_CASE("pinned host memory is pinned; ordinary memory is pageable", "[driver][memory][gpu]") {
  pinned_buffer p = pinned_buffer::allocate(ctx(), 4096);
  CHECK(is_pinned(p.get()));
  CHECK(classify_pointer(p.get()) == memory_kind::pinned_host);
  std::vector<char> pageable(4096);
  CHECK_FALSE(is_pinned(pageable.data()));
  CHECK(classify_pointer(pageable.data()) == memory_kind::pageable_host);
  device_buffer d = device_buffer::allocate(ctx(), 4096);
  CHECK(classify_pointer(reinterpret_cast<void*>(d.get())) == memory_kind::device);
  CHECK(p.device_pointer() != 0);
  CHECK_THROWS_WITH(pinned_buffer::allocate(ctx(), 0), Catch::Contains("zero-byte allocation"));
}

TEST_CASE("registered host memory is pinned while registered and copies both ways", "[driver][memory][gpu]") {
  std::vector<int> host(1 << 16);
  std::iota(host.begin(), host.end(), 3);
  stream s = stream::create(ctx());
  device_buffer d = device_buffer::allocate(ctx(), host.size() * sizeof(int));
  {
    host_registration reg = host_registration::register_memory(ctx(), host.data(), host.size() * sizeof(int));
    CHECK(is_pinned(host.data()));
    copy_async(s, d.span(), std::as_bytes(std::span(host)));
    launch(s, kernels().kernel("add_value"), {.grid = (1 << 16) / 256, .block = 256}, d.data<int>(), 1 << 16, 10);
    copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
    s.synchronize();
  }
  CHECK_FALSE(is_pinned(host.data()));
  for (int i = 0; i < (1 << 16); ++i) REQUIRE(host[i] == i + 13);
}

TEST_CASE("registering host memory twice is refused, naming it", "[driver][memory][gpu][api_error]") {
  std::vector<int> host(1 << 12);
  host_registration reg = host_registration::register_memory(ctx(), host.data(), host.size() * sizeof(int));
  CHECK_THROWS_WITH(host_registration::register_memory(ctx(), host.data(), 4096), Catch::Contains("already registered"));
  CHECK(is_pinned(host.data()));
}

TEST_CASE("managed memory is prefetched to the device, used by a kernel and read on the host", "[driver][memory][gpu]") {
  const int n = 1 << 20;
  managed_buffer m = managed_buffer::allocate(ctx(), n * sizeof(int));
  CHECK(classify_pointer(m.data<int>()) == memory_kind::managed);
  auto h = m.host_span<int>();
  for (int i = 0; i < n; ++i) h[i] = i;
  stream s = stream::create(ctx());
  m.advise(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, memory_location::on_device(0));
  m.prefetch_async(s, memory_location::on_device(0));
  launch(s, kernels().kernel("add_value"), {.grid = n / 256, .block = 256}, m.data<int>(), n, 5);
  m.prefetch_async(s, memory_location::on_host());
  s.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(h[i] == i + 5);
  CHECK_THROWS_AS(m.prefetch_async(s, memory_location::on_host(), device_span{m.get() + 8, m.size()}), cuda_error);
}

TEST_CASE("stream-ordered allocation and free, 10^5 times", "[driver][memory][pool][gpu]") {
  stream s = stream::create(ctx());
  memory_pool_ref pool = memory_pool_ref::device_default(ctx());
  pool.set_release_threshold(UINT64_MAX);
  CHECK(pool.release_threshold() == UINT64_MAX);
  for (int i = 0; i < 100000; ++i) {
    CUdeviceptr p = pool.allocate_async(s, 1 << 20);
    if (i % 10000 == 0) memset_async(s, {p, 1 << 20}, 0x5a);
    memory_pool_ref::free_async(s, p);
  }
  s.synchronize();
  // The last allocation is used by a kernel and read back: the memory is real.
  pool_buffer b = pool_buffer::allocate_async(pool, s, 256 * sizeof(int));
  launch(s, kernels().kernel("fill_iota"), {.grid = 1, .block = 256}, b.data<int>(), 256, 9);
  std::vector<int> out(256);
  copy_async(s, std::as_writable_bytes(std::span(out)), b.span());
  b.free_async();
  s.synchronize();
  CHECK(out[255] == 264);
  CHECK(pool.used_bytes() == 0);
}

TEST_CASE("a created pool with a size cap refuses more than the cap", "[driver][memory][pool][gpu][api_error]") {
  memory_pool pool = memory_pool::create(ctx(), {.max_size = 64 << 20});
  stream s = stream::create(ctx());
  CUdeviceptr p = pool.allocate_async(s, 32 << 20);
  CHECK_THROWS_WITH(pool.allocate_async(s, 64 << 20), Catch::Contains("CUDA_ERROR_OUT_OF_MEMORY"));
  memory_pool_ref::free_async(s, p);
  s.synchronize();
  CHECK_THROWS_WITH(pool.allocate_async(s, 0), Catch::Contains("zero-byte allocation"));
}
