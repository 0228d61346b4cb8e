// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "gpu.hpp"

#include <cuasync/engine/cuda_completion_source.hpp>

#include <thread>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
std::shared_ptr<device_runtime> rt() { return device_runtime::for_device(0); }
}  // namespace

TEST_CASE("size classes are powers of two from 4 KiB", "[runtime][pinned]") {
  CHECK(pinned_pool::size_class(1) == 4096);
  CHECK(pinned_pool::size_class(4096) == 4096);
  CHECK(pinned_pool::size_class(4097) == 8192);
  CHECK(pinned_pool::size_class(3 << 20) == 4 << 20);
  CHECK(pinned_pool::size_class(std::size_t{1} << 63) == std::size_t{1} << 63);
  CHECK(pinned_pool::size_class((std::size_t{1} << 63) + 1) == 0);  // a negative size cast: no class
  CHECK(pinned_pool::size_class(SIZE_MAX) == 0);
}

TEST_CASE("an empty context or stream refused by a runtime or the event pool names the caller's line", "[runtime][events]") {
  // Refused before any driver call: no GPU needed.
  using test::check_call_site;
  using test::error_of;
  check_call_site(error_of([] { device_runtime::adopt(context_ref{}); }));
  check_call_site(error_of([] { event_pool::for_context(context_ref{}); }));
  check_call_site(error_of([] { cuda_completion_source::instance().record(stream_ref{}); }));
}

TEST_CASE("the pinned pool reuses freed blocks and counts hits and misses", "[runtime][pinned][gpu]") {
  // Without the pageable-copy reserve, whose background allocations would count as misses here.
  auto r = device_runtime::create(0, {.pinned_cap_bytes = 64 << 20, .reserve_pageable_staging = false});
  auto& pool = *r->pinned();
  void* first = nullptr;
  {
    pinned_block b = pool.allocate(100000);
    CHECK(b.size() == 100000);
    CHECK(b.capacity() == 131072);
    CHECK(is_pinned(b.get()));
    first = b.get();
  }
  pinned_block again = pool.allocate(120000);
  CHECK(again.get() == first);
  auto st = pool.stats();
  CHECK(st.hits == 1);
  CHECK(st.misses == 1);
  CHECK(st.bytes_in_use == 131072);
  CHECK_THROWS_WITH(pool.allocate(0), Catch::Contains("zero-byte"));
  CHECK_THROWS_WITH(pool.allocate(128 << 20), Catch::Contains("exceed the pool's cap"));
  CHECK_THROWS_WITH(pool.allocate(std::size_t{1} << 62), Catch::Contains("exceed the pool's cap"));  // no overflow
  CHECK_THROWS_WITH(pool.allocate(SIZE_MAX), Catch::Contains("larger than any host memory"));  // a -1 cast
}

// [concurrent]: a gate kernel spins while this thread enqueues more; compute-sanitizer serializes kernels, so the
// next launch would wait for the gate this thread must open.
TEST_CASE("a freed pinned block is not handed out while GPU work still uses it", "[runtime][pinned][gpu][concurrent]") {
  auto r = device_runtime::create(0);
  auto& pool = *r->pinned();
  stream s = stream::create(r->context());
  test::gate g;
  void* used = nullptr;
  // Freed only after the gate opens: cuMemFree waits for the device, which the gate holds.
  device_buffer d = device_buffer::allocate(r->context(), 1 << 20);
  {
    pinned_block b = pool.allocate(1 << 20);
    used = b.get();
    g.close(s);
    copy_async(s, d.span(), std::span<const std::byte>(b.bytes()));
    b.record_use(s);
  }
  pinned_block other = pool.allocate(1 << 20);  // the first block is pending: a new one is allocated
  CHECK(other.get() != used);
  CHECK(pool.stats().bytes_pending == (1 << 20));
  g.open();
  s.synchronize();
  pinned_block third = pool.allocate(1 << 20);  // now the first block is free again
  CHECK(third.get() == used);
  CHECK(pool.stats().bytes_pending == 0);
}

TEST_CASE("the stream pool hands out non-blocking streams by priority", "[runtime][streams][gpu]") {
  auto r = rt();
  auto [least, greatest] = r->context().stream_priority_range();
  stream_ref hi = r->streams().next(priority::high);
  CHECK(hi.priority() == greatest);
  CHECK(r->streams().next(priority::normal).priority() == least);
  CHECK(hi.flags() == CU_STREAM_NON_BLOCKING);
  stream_ref a = r->streams().next(), b = r->streams().next();
  CHECK(!(a == b));  // round-robin
  CUstream borrowed = nullptr;
  {
    auto lease = r->streams().borrow(priority::high);
    borrowed = lease.get().get();
    CHECK(lease.get().priority() == greatest);
  }
  auto again = r->streams().borrow(priority::high);
  CHECK(again.get().get() == borrowed);  // returned and reused
}

TEST_CASE("the context's one event pool recycles events", "[runtime][events][gpu]") {
  auto r = device_runtime::create(0);
  auto pool = event_pool::for_context(r->context());
  CHECK(pool == r->events());  // one pool per context, shared by every user of it
  stream s = stream::create(r->context());
  CUevent first = nullptr;
  const std::size_t created = pool->created();
  {
    pooled_event e = pool->record(s);
    first = e.event().get();
    s.synchronize();
    CHECK(e.query());
  }
  pooled_event e2 = pool->record(s);
  CHECK(e2.event().get() == first);  // the same event again: recycled, not created
  CHECK(pool->created() == std::max<std::size_t>(created, 1));
}
