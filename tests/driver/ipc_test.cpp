// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Interprocess handles: the wire form and the RAII paths without a device; across two processes on the GPU machine
// (examples/ipc runs the producer/consumer on two GPUs).
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/ipc.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

using namespace cuasync;

TEST_CASE("an IPC memory handle survives its wire form, and junk is refused", "[driver][ipc]") {
  ipc_memory_handle h;
  for (std::size_t i = 0; i < sizeof h.handle.reserved; ++i) h.handle.reserved[i] = static_cast<char>(i + 1);
  h.size = 12345;
  h.device = 1;
  const auto bytes = h.to_bytes();
  const ipc_memory_handle back = ipc_memory_handle::from_bytes(bytes);
  CHECK(std::memcmp(&back.handle, &h.handle, sizeof h.handle) == 0);
  CHECK(back.size == 12345);
  CHECK(back.device == 1);
  CHECK_THROWS_WITH(ipc_memory_handle::from_bytes(std::span(bytes).first(10)), Catch::Contains("expected"));
  auto junk = bytes;
  junk[0] = std::byte{'X'};
  CHECK_THROWS_WITH(ipc_memory_handle::from_bytes(junk), Catch::Contains("not a cuasync IPC memory handle"));
  CHECK_THROWS_WITH(ipc_memory_handle::from_bytes(ipc_memory_handle{}.to_bytes()), Catch::Contains("empty handle"));
}

TEST_CASE("IPC owners are move-only and empty ones are refused before the driver", "[driver][ipc]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<ipc_mapping>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<ipc_mapping>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<ipc_memory_handle>);
  ipc_mapping none;
  CHECK_FALSE(none);
  ipc_mapping moved(std::move(none));
  CHECK_FALSE(moved);
  CHECK(moved.span().size == 0);
  CHECK_THROWS_WITH(ipc_mapping::open(context_ref(), ipc_memory_handle{}), Catch::Contains("empty context"));
  CHECK_THROWS_WITH(ipc_memory_handle::of(device_span{}, context_ref()), Catch::Contains("empty context"));
  CHECK_THROWS_WITH(ipc_event_handle::of(event_ref()), Catch::Contains("empty event"));
  CHECK_THROWS_WITH(ipc_event_handle{}.open(context_ref()), Catch::Contains("empty context"));
}

TEST_CASE("cuMemAlloc memory and interprocess events give IPC handles", "[driver][ipc][gpu]") {
  device_buffer b = device_buffer::allocate(test::ctx(), 1 << 20);
  const ipc_memory_handle h = ipc_memory_handle::of(b.span(), test::ctx());
  CHECK(h.size == b.size());
  CHECK(h.device == 0);
  event e = event::create(test::ctx(), {.interprocess = true});
  const ipc_event_handle eh = ipc_event_handle::of(e);
  CHECK(std::any_of(std::begin(eh.handle.reserved), std::end(eh.handle.reserved), [](char c) { return c != 0; }));
}
