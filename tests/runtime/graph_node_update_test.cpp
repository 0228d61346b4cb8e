// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Per-node updates of an instantiated graph (graph_exec::set_kernel_launch, set_kernel_node_enabled): checked like a
// launch before the driver is asked, and seen by the next launch of the graph.
#include <cuasync/runtime/graph.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "gpu.hpp"

#include <algorithm>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;
using Catch::Matchers::Contains;

TEST_CASE("a kernel node's configuration and arguments change in place, checked like a launch",
          "[runtime][graph][gpu]") {
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  constexpr int n = 1 << 16;
  device_buffer d = device_buffer::allocate(ctx, n * sizeof(int));
  const kernel_ref add = test::kernels().kernel("add_value");
  graph g = graph::capture(s, [&](stream_ref st) {
    memset_async(st, d.span(), 0);
    launch(st, add, {.grid = 1, .block = 256}, d.data<int>(), 256, 1);  // the first 256 elements only
    launch(st, add, {.grid = 1, .block = 256}, d.data<int>(), 256, 10);
  });
  graph_exec e = g.instantiate();
  REQUIRE(e.kernel_node_count() == 2);
  auto run = [&] {
    std::vector<int> host(n, -1);
    e.launch(s);
    copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
    s.synchronize();
    return host;
  };
  std::vector<int> host = run();
  CHECK(std::count(host.begin(), host.begin() + 256, 11) == 256);
  CHECK(std::count(host.begin() + 256, host.end(), 0) == n - 256);

  // The whole buffer now: a grid of n / 256 blocks and n elements for node 0.
  e.set_kernel_launch(0, {.grid = n / 256, .block = 256}, d.data<int>(), n, 2);
  host = run();
  CHECK(std::count(host.begin(), host.begin() + 256, 12) == 256);
  CHECK(std::count(host.begin() + 256, host.end(), 2) == n - 256);

  SECTION("a node turned off does nothing until turned on again") {
    CHECK(e.kernel_node_enabled(1));
    e.set_kernel_node_enabled(1, false);
    CHECK_FALSE(e.kernel_node_enabled(1));
    host = run();
    CHECK(std::count(host.begin(), host.end(), 2) == n);
    e.set_kernel_node_enabled(1, true);
    host = run();
    CHECK(std::count(host.begin(), host.begin() + 256, 12) == 256);
    CHECK_THROWS_WITH(e.set_kernel_node_enabled(2, false), Contains("kernel node 2 of 2"));
    CHECK_THROWS_WITH(e.kernel_node_enabled(9), Contains("kernel node 9 of 2"));
  }
  SECTION("bad updates are refused before the driver sees them, and the node keeps its values") {
    const auto& limits = ctx.device().properties();
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 2048}, d.data<int>(), n, 3),
                      Contains("2048 threads per block") || Contains("block.x = 2048"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 256, .shared_memory_bytes = 1u << 30},
                                          d.data<int>(), n, 3),
                      Contains("dynamic shared memory"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = {1, unsigned(limits.max_grid_dim[1]) + 1}, .block = 256},
                                          d.data<int>(), n, 3),
                      Contains("grid.y"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 256}, d.data<int>(), n),
                      Contains("takes 3 parameter(s) but 2"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 256}, d.data<int>(), std::size_t{1}, 3),
                      Contains("parameter 1 is 4 bytes"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 256, .cooperative = true}, d.data<int>(), n, 3),
                      Contains("keeps the launch attributes"));
    CHECK_THROWS_WITH(e.set_kernel_launch(0, {.grid = 1, .block = 256, .dependent_launch = true}, d.data<int>(), n,
                                          3),
                      Contains("keeps the launch attributes"));
    CHECK_THROWS_WITH(e.set_kernel_launch(5, {.grid = 1, .block = 256}, d.data<int>(), n, 3),
                      Contains("kernel node 5 of 2"));
    test::check_call_site(test::error_of([&] { e.set_kernel_launch(5, {.grid = 1}, 1); }));
    host = run();
    CHECK(std::count(host.begin(), host.begin() + 256, 12) == 256);
    CHECK(std::count(host.begin() + 256, host.end(), 2) == n - 256);
  }
}
