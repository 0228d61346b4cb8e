// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Conditional nodes built through runtime::graph (issue 30, scope 3): a while node whose body runs as many times as
// the data says (Collatz steps of an input, counted on the device, against a CPU reference), if / else nodes, the
// handle set by JIT kernels (`cudaGraphSetConditional` through jit::program::add_graph_conditional_header), and bad
// input refused before the driver sees it. The kernels carry the simulated driver's names (sim_kernels.cpp), so
// every case runs the same sources there too (as PTX: FAKE_CUDA_COMPUTE_CAPABILITY=95; CTest
// runtime_graph_conditional_simulated); the [gpu] cases replay an instantiated graph with new arguments
// (graph_exec::set_kernel_arguments, set_memset), the [.simulated] ones build a graph per input and check what the
// simulation alone can show (bad input refused before the driver, whose answer on a GPU is undefined or vaguer).
#include <cuasync/runtime/graph.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;
using Catch::Matchers::Contains;

namespace {
const char* conditional_source = R"(
#include <cuasync/graph_conditional.cuh>
extern "C" __global__ void sim_collatz_start(unsigned* x, unsigned* steps, unsigned x0, cudaGraphConditionalHandle h) {
  *x = x0;
  *steps = 0;
  cudaGraphSetConditional(h, x0 != 1);
}
extern "C" __global__ void sim_collatz_step(unsigned* x, unsigned* steps, cudaGraphConditionalHandle h) {
  unsigned v = *x;
  v = v % 2 ? 3 * v + 1 : v / 2;
  *x = v;
  ++*steps;
  cudaGraphSetConditional(h, v != 1);
}
extern "C" __global__ void sim_set_conditional(cudaGraphConditionalHandle h, unsigned value) {
  cudaGraphSetConditional(h, value);
}
extern "C" __global__ void sim_add_u32(unsigned* p, unsigned n, unsigned value) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += value;
}
)";

// Steps of the Collatz sequence from x0 to 1: the CPU reference.
unsigned collatz_steps(std::uint64_t x) {
  unsigned n = 0;
  for (; x != 1; ++n) x = x % 2 ? 3 * x + 1 : x / 2;
  return n;
}

struct kernels {
  kernel_ref start, step, set, add;
};
kernels conditional_kernels(device_runtime& rt) {
  jit::program p("graph_conditional.cu", conditional_source);
  p.add_graph_conditional_header();
  return {rt.kernel(p, "sim_collatz_start"), rt.kernel(p, "sim_collatz_step"), rt.kernel(p, "sim_set_conditional"),
          rt.kernel(p, "sim_add_u32")};
}

constexpr launch_config one{.grid = 1, .block = 1};

// x = x0; while (x != 1) { x = step(x); ++steps; } then steps copied to `out`: kernel node 0 is the start, whose
// third argument is x0.
graph collatz_graph(stream_ref s, const kernels& k, device_buffer& x, device_buffer& steps, unsigned x0,
                    std::span<std::uint32_t> out, conditional_handle* handle) {
  graph g = graph::create(s.context());
  const conditional_handle h = g.create_conditional(0);
  g.append(s, [&](stream_ref st) { launch(st, k.start, one, x.data<unsigned>(), steps.data<unsigned>(), x0, h); });
  g.add_while(h, [&](graph_builder& body) {
    body.append(s, [&](stream_ref st) { launch(st, k.step, one, x.data<unsigned>(), steps.data<unsigned>(), h); });
  });
  g.append(s, [&](stream_ref st) { copy_async(st, out.first(1), steps.span()); });
  *handle = h;
  return g;
}

// if (value) p[i] += 10 else p[i] += 100, after p[i] = 1; kernel node 0 sets the handle to its second argument.
graph if_else_graph(stream_ref s, const kernels& k, device_buffer& d, unsigned n, unsigned value,
                    std::span<std::uint32_t> out, conditional_handle* handle) {
  graph g = graph::create(s.context());
  const conditional_handle h = g.create_conditional(0);
  g.append(s, [&](stream_ref st) {
    memset32_async(st, d.span(), 1);
    launch(st, k.set, one, h, value);
  });
  g.add_if_else(
      h,
      [&](graph_builder& then_body) {
        then_body.append(s, [&](stream_ref st) {
          launch(st, k.add, {.grid = 1, .block = n}, d.data<unsigned>(), n, 10u);
        });
      },
      [&](graph_builder& else_body) {
        else_body.append(s, [&](stream_ref st) {
          launch(st, k.add, {.grid = 1, .block = n}, d.data<unsigned>(), n, 100u);
        });
      });
  g.append(s, [&](stream_ref st) { copy_async(st, out, d.span()); });
  *handle = h;
  return g;
}

// What each case uses: the runtime, the kernels, a stream, `n` device words with a pinned twin, and the Collatz
// state (x, steps).
struct setup {
  std::shared_ptr<device_runtime> rt = device_runtime::for_device(0);
  kernels k = conditional_kernels(*rt);
  stream s = stream::create(rt->context());
  device_buffer d, x = device_buffer::allocate(rt->context(), 4), steps = device_buffer::allocate(rt->context(), 4);
  pinned_buffer host;
  std::span<std::uint32_t> out;
  explicit setup(unsigned n)
      : d(device_buffer::allocate(rt->context(), n * 4)), host(pinned_buffer::allocate(rt->context(), n * 4)),
        out(host.as_span<std::uint32_t>()) {}
};

const unsigned collatz_inputs[] = {27, 1, 97, 871, 6171, 77031};
}  // namespace

TEST_CASE("a while node runs its body as many times as the data needs, counted on the device",
          "[runtime][graph][conditional][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  setup t(1);
  stream_ref s = t.s;
  const std::span<std::uint32_t> out = t.out;
  for (unsigned x0 : collatz_inputs) {
    conditional_handle h;
    graph g = collatz_graph(s, t.k, t.x, t.steps, x0, out, &h);
    CHECK(g.node_count() == 3);  // start, the while node, the copy
    graph_exec e = g.instantiate();
    for (int replay = 0; replay < 2; ++replay) {  // the handle starts at its default again
      out[0] = 0xeeeeeeeeu;
      e.launch(s);
      s.synchronize();
      INFO("x0 = " << x0 << ", replay " << replay);
      CHECK(out[0] == collatz_steps(x0));
    }
  }
  CHECK(collatz_steps(27) == 111);  // the reference itself
}

TEST_CASE("an if node runs its body or its else body as a kernel set the handle",
          "[runtime][graph][conditional][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  constexpr unsigned n = 64;
  setup t(n);
  stream_ref s = t.s;
  const std::span<std::uint32_t> out = t.out;
  for (unsigned value : {0u, 1u, 7u}) {
    conditional_handle h;
    graph_exec e = if_else_graph(s, t.k, t.d, n, value, out, &h).instantiate();
    e.launch(s);
    s.synchronize();
    INFO("value " << value);
    CHECK(std::count(out.begin(), out.end(), value ? 11u : 101u) == n);
  }
}

TEST_CASE("conditional nodes refuse a handle of another graph, a body of the wrong kind and an unused handle",
          "[runtime][graph][conditional][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  auto rt = device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  device_buffer d = device_buffer::allocate(rt->context(), 64);
  graph g = graph::create(rt->context());
  graph other = graph::create(rt->context());
  const conditional_handle mine = g.create_conditional(1), theirs = other.create_conditional(1);
  auto nothing = [](graph_builder&) {};

  CHECK_THROWS_WITH(g.add_while(theirs, nothing), Contains("graph_builder::add_while") &&
                                                      Contains("was not made by graph::create_conditional"));
  CHECK_THROWS_WITH(g.add_if(conditional_handle{12345}, nothing), Contains("conditional handle 12345"));
  CHECK(g.node_count() == 0);  // nothing reached the driver

  // A host function in a body: the node is named, and what a body may hold is said.
  CHECK_THROWS_WITH(g.add_if(mine,
                             [&](graph_builder& body) {
                               body.append(s, [&](stream_ref st) {
                                 cuasync::detail::driver().cuLaunchHostFunc(st.get(), [](void*) {}, nullptr);
                               });
                             }),
                    Contains("graph_builder::add_if") && Contains("its node 0 is a host function") &&
                        Contains("kernels, memsets, copies and conditional nodes only"));

  // A handle no node uses fails the instantiation, naming it.
  graph unused = graph::create(rt->context());
  const conditional_handle idle = unused.create_conditional();
  unused.append(s, [&](stream_ref st) { memset_async(st, d.span(), 0); });
  CHECK_THROWS_WITH(unused.instantiate(),
                    Contains(std::to_string(idle.value)) && Contains("used by no conditional node"));

  // A moved-from graph takes nothing; the one moved into takes its handles along.
  graph moved;
  CHECK_THROWS_WITH(moved.create_conditional(), Contains("moved from"));
  moved = std::move(other);
  CHECK_THROWS_WITH(other.add_while(theirs, nothing), Contains("moved from"));
  moved.add_while(theirs, nothing);
  CHECK(moved.node_count() == 1);
  moved = graph::create(rt->context());  // the graph it held is destroyed
  CHECK(moved.node_count() == 0);

  // A captured graph takes no more pieces.
  graph captured = graph::capture(s, [&](stream_ref st) { memset_async(st, d.span(), 0); });
  CHECK_THROWS_WITH(captured.create_conditional(), Contains("was captured"));
  CHECK_THROWS_WITH(captured.append(s, [](stream_ref) {}), Contains("was captured"));
  CHECK(captured.node_count() == 1);

  // The memset nodes of an instantiated graph are counted; an index past them is refused, naming the graph exec.
  unused.add_if(idle, nothing);  // now used
  graph_exec e = unused.instantiate();
  CHECK(e.memset_node_count() == 1);
  CHECK(e.kernel_node_count() == 0);
  CHECK_THROWS_WITH(e.set_memset(3, d.span(), std::uint8_t{1}), Contains("memset node 3 of 1 (graph exec"));
  CHECK_THROWS_WITH(e.set_kernel_arguments(0, 1), Contains("kernel node 0 of 0"));
}

TEST_CASE("a while node replayed with new inputs runs each input's number of Collatz steps",
          "[runtime][graph][conditional][gpu]") {
  setup t(1);
  stream_ref s = t.s;
  const std::span<std::uint32_t> out = t.out;
  conditional_handle h;
  graph g = collatz_graph(s, t.k, t.x, t.steps, 27, out, &h);
  graph_exec e = g.instantiate();
  REQUIRE(e.kernel_node_count() == 1);  // the start; the step is inside the while node's body
  for (int round = 0; round < 3; ++round)
    for (unsigned x0 : collatz_inputs) {
      e.set_kernel_arguments(0, t.x.data<unsigned>(), t.steps.data<unsigned>(), x0, h);
      out[0] = 0xeeeeeeeeu;
      e.launch(s);
      s.synchronize();
      INFO("x0 = " << x0 << ", round " << round);
      CHECK(out[0] == collatz_steps(x0));
    }
  std::ostringstream seen;
  for (unsigned x0 : collatz_inputs) seen << ' ' << x0 << ':' << collatz_steps(x0);
  WARN("while node: each input's Collatz steps (x0:steps)" << seen.str() << ", 3 rounds, counted on the device");
  CHECK_FALSE(t.rt->context().take_deferred_error());
}

TEST_CASE("an if / else node replayed with new handle values takes the branch each value says",
          "[runtime][graph][conditional][gpu]") {
  constexpr unsigned n = 256;
  setup t(n);
  stream_ref s = t.s;
  const std::span<std::uint32_t> out = t.out;
  conditional_handle h;
  graph g = if_else_graph(s, t.k, t.d, n, 0, out, &h);
  graph_exec e = g.instantiate();
  for (unsigned value : {0u, 1u, 0u, 9u}) {
    e.set_kernel_arguments(0, h, value);
    std::fill(out.begin(), out.end(), 0u);
    e.launch(s);
    s.synchronize();
    INFO("value " << value);
    CHECK(std::count(out.begin(), out.end(), value ? 11u : 101u) == n);
  }
  CHECK_THROWS_WITH(e.set_kernel_arguments(0, h), Contains("takes 2 parameter(s) but 1"));
}

TEST_CASE("conditional nodes nest: an if node inside a while node's body runs once per iteration",
          "[runtime][graph][conditional][gpu]") {
  setup t(1);
  stream_ref s = t.s;
  graph g = graph::create(s.context());
  const conditional_handle loop = g.create_conditional(0), always = g.create_conditional(1);
  unsigned* counter = t.d.data<unsigned>();
  g.append(s, [&](stream_ref st) {
    memset32_async(st, t.d.span(), 0);
    launch(st, t.k.start, one, t.x.data<unsigned>(), t.steps.data<unsigned>(), 97u, loop);
  });
  g.add_while(loop, [&](graph_builder& body) {
    body.append(s, [&](stream_ref st) {
      launch(st, t.k.step, one, t.x.data<unsigned>(), t.steps.data<unsigned>(), loop);
    });
    body.add_if(always, [&](graph_builder& inner) {  // a handle of the whole graph, used two levels down
      inner.append(s, [&](stream_ref st) { launch(st, t.k.add, one, counter, 1u, 1u); });
    });
  });
  g.append(s, [&](stream_ref st) { copy_async(st, t.out, t.d.span()); });
  graph_exec e = g.instantiate();
  for (int replay = 0; replay < 2; ++replay) {
    t.out[0] = 0;
    e.launch(s);
    s.synchronize();
    CHECK(t.out[0] == collatz_steps(97));
  }
}

TEST_CASE("a memset node's range and value change in place, checked against what it was captured with",
          "[runtime][graph][conditional][gpu]") {
  auto rt = device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  constexpr std::size_t n = 1024;
  device_buffer a = device_buffer::allocate(rt->context(), n * 4), b = device_buffer::allocate(rt->context(), n * 4);
  pinned_buffer host = pinned_buffer::allocate(rt->context(), 2 * n * 4);
  const std::span<std::uint32_t> out = host.as_span<std::uint32_t>();
  memset32_async(s, a.span(), 0);
  memset32_async(s, b.span(), 0);
  graph g = graph::capture(s, [&](stream_ref st) {
    memset32_async(st, a.span(), 7);
    copy_async(st, out.first(n), a.span());
    copy_async(st, out.subspan(n), b.span());
  });
  graph_exec e = g.instantiate();
  REQUIRE(e.memset_node_count() == 1);
  e.launch(s);
  s.synchronize();
  CHECK(std::count(out.begin(), out.begin() + n, 7u) == n);
  CHECK(std::count(out.begin() + n, out.end(), 0u) == n);

  e.set_memset(0, b.span(), std::uint32_t{9});  // now b, with 9
  memset32_async(s, a.span(), 0);
  e.launch(s);
  s.synchronize();
  CHECK(std::count(out.begin(), out.begin() + n, 0u) == n);
  CHECK(std::count(out.begin() + n, out.end(), 9u) == n);

  CHECK_THROWS_WITH(e.set_memset(0, b.span(), std::uint8_t{1}),
                    Contains("memset node 0 of graph exec") &&
                        Contains("sets 4-byte elements but the value given is 1"));
  CHECK_THROWS_WITH(e.set_memset(0, b.span().subspan(0, 64), std::uint32_t{1}),
                    Contains("sets 4096 bytes but the range given has 64"));
  CHECK_THROWS_WITH(e.set_memset(1, b.span(), std::uint32_t{1}), Contains("memset node 1 of 1"));
}
