// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Ordered copies (runtime/ordered_copy.hpp): every chunk enqueued in the call, behind a stream that cannot move, with
// nothing copied or allocated on the calling thread; the data right both ways once the stream goes on. On the
// simulated driver (its gate kernel holds the stream; it counts the calls each thread makes). CTest
// runtime_cold_paths_simulated runs them.
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/runtime/ordered_copy.hpp>
#include <cuasync/runtime/pageable_copy.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <chrono>
#include <cstring>
#include <future>
#include <numeric>

using namespace cuasync;
using namespace cuasync::runtime;
using namespace std::chrono_literals;

namespace {
struct done_promise final : ordered_copy_callback {
  std::promise<std::error_code> result;
  void done(std::error_code ec) noexcept override { result.set_value(ec); }
};

long calls_here(const char* entry) {
  const long n = test::simulated_calls_here(entry);
  REQUIRE(n >= 0);
  return n;
}

// A stream and what its ordered copies take: the context's events, a pool, copy threads, the stream's gate.
struct ordered_fixture {
  context_ref c = test::ctx();
  stream s = stream::create(c);
  std::shared_ptr<event_pool> events = event_pool::for_context(c);
  std::shared_ptr<pinned_pool> pool = std::make_shared<pinned_pool>(c, events, std::size_t{64} << 20);
  memcpy_team team{2};
  stream_gate gate;
};

std::vector<pinned_block> chunks_of(pinned_pool& pool, std::size_t n, std::size_t bytes) {
  std::vector<pinned_block> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(pool.allocate(bytes));
  return v;
}
}  // namespace

TEST_CASE("an ordered copy enqueues every chunk in the call behind a held stream, copies nothing there, and lands "
          "both ways",
          "[runtime][cold][ordered][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  ordered_fixture f;
  auto& [c, s, events, pool, team, gate] = f;
  { pinned_block word = pool->allocate(sizeof(std::uint32_t)); }  // idle: the gate takes it without allocating
  REQUIRE(gate.ready(pool));

  constexpr std::size_t chunk = 64 << 10, chunks = 2, bytes = (1 << 20) + 7;  // 17 chunks through 2
  const std::size_t count = (bytes + chunk - 1) / chunk;
  std::vector<std::byte> src(bytes), back(bytes);
  for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<std::byte>(i * 131 + (i >> 9));
  device_buffer dev = device_buffer::allocate(c, bytes);
  const bool streaming = GENERATE(false, true);
  CAPTURE(streaming);

  std::vector<pinned_block> in_chunks = chunks_of(*pool, chunks, chunk), out_chunks = chunks_of(*pool, chunks, chunk);
  (void)events->record(s);  // the event pool's first host words (its own growth, not the copy's) come before counting
  test::sim_gate held(c);
  held.close(s);  // nothing enqueued after this runs until it opens
  const long allocs = test::simulated_pinned_allocations_here(), waits = calls_here("cuStreamWaitValue32"),
             dmas = calls_here("cuMemcpyAsync");
  done_promise to_device;
  REQUIRE(start_ordered_copy({.s = s, .gate = &gate, .to_device = true, .host = src.data(), .device = dev.get(),
                              .bytes = bytes, .chunks = std::move(in_chunks), .team = &team,
                              .streaming_stores = streaming, .events = events},
                             &to_device));
  // Returned with the stream held: it waited for no chunk, and every chunk's wait and DMA is on the stream.
  CHECK(calls_here("cuStreamWaitValue32") - waits == static_cast<long>(count));
  CHECK(calls_here("cuMemcpyAsync") - dmas == static_cast<long>(count));
  auto landed = to_device.result.get_future();
  CHECK(landed.wait_for(20ms) == std::future_status::timeout);

  // Back, enqueued behind it while the stream is still held: the first `chunks` chunks need no wait.
  const long waits_back = calls_here("cuStreamWaitValue32");
  done_promise to_host;
  REQUIRE(start_ordered_copy({.s = s, .gate = &gate, .to_device = false, .host = back.data(), .device = dev.get(),
                              .bytes = bytes, .chunks = std::move(out_chunks), .team = &team,
                              .streaming_stores = streaming, .events = events},
                             &to_host));
  CHECK(calls_here("cuStreamWaitValue32") - waits_back == static_cast<long>(count - chunks));
  CHECK(test::simulated_pinned_allocations_here() == allocs);  // the chunks were given: nothing allocated here

  held.open();
  REQUIRE(landed.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(landed.get());
  auto arrived = to_host.result.get_future();
  REQUIRE(arrived.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(arrived.get());
  CHECK(std::memcmp(back.data(), src.data(), bytes) == 0);
  s.synchronize();  // the gate's word was released past every wait: the stream is free
}

TEST_CASE("the pageable-copy policy picks the route by caller, size and what is ready", "[runtime][ordered]") {
  pageable_copy_policy p;
  using enum pageable_route;
  CHECK(choose_pageable_route(p, pageable_caller::blocking, p.driver_below_bytes - 1, true) == driver);
  CHECK(choose_pageable_route(p, pageable_caller::blocking, p.driver_below_bytes, false) == ring);
  CHECK(choose_pageable_route(p, pageable_caller::awaiting, 4096, true) == ring);
  const auto non_blocking = [&](std::size_t n, bool to_device, pageable_resources r) {
    return choose_pageable_route(p, pageable_caller::non_blocking, n, to_device, r);
  };
  // Without whole blocks (CUASYNC_WHOLE_BLOCK_UP_TO_MIB=0): the chunks.
  p.whole_block_up_to_bytes = 0;
  CHECK(non_blocking(64 << 20, true, {.whole_block = true, .chunks = true, .gate = true}) == chunks);
  CHECK(non_blocking(64 << 20, false, {.whole_block = true, .chunks = true, .gate = true}) == chunks);
  CHECK(non_blocking(64 << 20, true, {.chunks = true}) == ring);  // the chunks' H2D waits on the gate
  CHECK(non_blocking(p.chunks_up_to_bytes + 1, true, {.chunks = true, .gate = true}) == ring);
  p.whole_block_up_to_bytes = std::size_t{256} << 20;
  CHECK(non_blocking(64 << 20, true, {.whole_block = true, .gate = true}) == whole_block);
  CHECK(non_blocking(64 << 20, false, {.whole_block = true}) == whole_block);  // D2H needs no gate
  CHECK(non_blocking(64 << 20, true, {.whole_block = true}) == ring);          // H2D does
  CHECK(non_blocking(64 << 20, true, {.chunks = true, .gate = true}) == chunks);
  CHECK(non_blocking(64 << 20, false, {.chunks = true, .gate = true}) == chunks);
  CHECK(non_blocking(64 << 20, true, {}) == ring);
  CHECK(non_blocking(p.whole_block_up_to_bytes + 1, true, {.whole_block = true, .gate = true}) == ring);
  p.chunks_up_to_bytes = std::size_t{16} << 20;  // whole blocks reach further than the chunks
  CHECK(non_blocking(64 << 20, true, {.whole_block = true, .chunks = true, .gate = true}) == whole_block);
  CHECK(non_blocking(64 << 20, true, {.chunks = true, .gate = true}) == ring);
}

TEST_CASE("an ordered copy refuses what it cannot do before enqueuing anything", "[runtime][ordered][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  ordered_fixture f;
  auto& [c, s, events, pool, team, gate] = f;
  std::vector<std::byte> host(4096);
  device_buffer dev = device_buffer::allocate(c, 4096);
  done_promise cb;
  const auto request = [&](std::vector<pinned_block> chunks) {
    return ordered_copy_request{.s = s, .gate = &gate, .to_device = true, .host = host.data(), .device = dev.get(),
                                .bytes = host.size(), .chunks = std::move(chunks), .team = &team, .events = events};
  };
  const long waits = calls_here("cuStreamWaitValue32");
  CHECK_THROWS_WITH((void)start_ordered_copy(request({}), &cb), Catch::Contains("needs chunks"));
  std::vector<pinned_block> uneven;
  uneven.push_back(pool->allocate(8192));
  uneven.push_back(pool->allocate(4096));
  CHECK_THROWS_WITH((void)start_ordered_copy(request(std::move(uneven)), &cb), Catch::Contains("different sizes"));
  CHECK(calls_here("cuStreamWaitValue32") == waits);
}
