// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/graph.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "gpu.hpp"
#include "trace_recording.hpp"

using namespace cuasync;
using namespace cuasync::runtime;

TEST_CASE("a captured graph relaunched gives the same result as direct execution", "[runtime][graph][gpu]") {
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  const int n = 1 << 16;
  device_buffer a = device_buffer::allocate(ctx, n * 4), b = device_buffer::allocate(ctx, n * 4);
  auto fill = test::kernels().kernel("fill_iota");
  auto twice = test::kernels().kernel("twice_plus_one");
  auto add = test::kernels().kernel("add_value");
  auto work = [&](stream_ref st) {
    memset_async(st, b.span(), 0);
    launch(st, fill, {.grid = n / 256, .block = 256}, a.data<int>(), n, 3);
    launch(st, twice, {.grid = n / 256, .block = 256}, a.data<int>(), b.data<int>(), n);
    launch(st, add, {.grid = n / 256, .block = 256}, b.data<int>(), n, 5);
  };
  std::vector<int> direct(n), graphed(n);
  work(s);
  copy_async(s, std::as_writable_bytes(std::span(direct)), b.span());
  s.synchronize();

  graph g = graph::capture(s, work);
  CHECK(g.node_count() == 4);
  graph_exec e = g.instantiate();
  CHECK(e.kernel_node_count() == 3);
  for (int rep = 0; rep < 3; ++rep) {
    std::fill(graphed.begin(), graphed.end(), -1);
    e.launch(s);
    copy_async(s, std::as_writable_bytes(std::span(graphed)), b.span());
    s.synchronize();
    REQUIRE(graphed == direct);
  }
  // Update the last kernel's argument in place: add 50 instead of 5.
  e.set_kernel_arguments(2, b.data<int>(), n, 50);
  e.launch(s);
  copy_async(s, std::as_writable_bytes(std::span(graphed)), b.span());
  s.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(graphed[i] == direct[i] + 45);
  CHECK_THROWS_WITH(e.set_kernel_arguments(2, b.data<int>(), n), Catch::Contains("takes 3 parameter(s) but 2"));
  CHECK_THROWS_WITH(e.set_kernel_arguments(2, b.data<int>(), std::size_t{1}, 50), Catch::Contains("parameter 1 is 4 bytes"));
  CHECK_THROWS_WITH(e.set_kernel_arguments(7, 1), Catch::Contains("kernel node 7 of 3"));
  // The index is taken with the caller's location (its arguments are variadic, as a launch's).
  test::check_call_site(test::error_of([&] { e.set_kernel_arguments(2, b.data<int>(), n); }));
  test::check_call_site(test::error_of([&] { e.set_kernel_arguments(7, 1); }));
}

TEST_CASE("a capture whose function throws is discarded", "[runtime][graph][gpu]") {
  stream s = stream::create(test::ctx());
  CHECK_THROWS_WITH(graph::capture(s, [](stream_ref) { throw std::runtime_error("boom"); }), "boom");
  // The stream is usable again.
  device_buffer d = device_buffer::allocate(test::ctx(), 16);
  memset_async(s, d.span(), 1);
  s.synchronize();
}

TEST_CASE("a graph captured while tracing is on is whole (the hooks ask nothing the capture forbids)",
          "[runtime][graph][gpu]") {
  test::trace_recording recording;  // the hooks are on: each launch and memset is described for the timeline
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  const int n = 1 << 10;
  device_buffer a = device_buffer::allocate(ctx, n * 4);
  auto fill = test::kernels().kernel("fill_iota");
  graph g = graph::capture(s, [&](stream_ref st) {
    memset_async(st, a.span(), 0);
    launch(st, fill, {.grid = n / 256, .block = 256}, a.data<int>(), n, 3);
  });
  CHECK(g.node_count() == 2);
  graph_exec e = g.instantiate();
  e.launch(s);
  std::vector<int> out(n);
  copy_async(s, std::as_writable_bytes(std::span(out)), a.span());
  s.synchronize();
  CHECK(out[0] == 3);
  CHECK(out[n - 1] == n - 1 + 3);
}
