// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Stream capture on the simulated driver (tests/fake_driver/entry_capture.cpp): what a capturing stream is given
// becomes graph nodes that a launch replays, an event joins a second stream into the capture, and what the CUDA
// documentation forbids during a capture invalidates it, as the driver does. Hidden [.simulated] cases (CTest
// driver_misuse_simulated); the same rules are what cuasync's capture-transparent operations are tested against.
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/stream.hpp>

#include <catch2/catch.hpp>

#include "sim_capture.hpp"
#include "simulated_driver.hpp"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;
using cuasync::detail::driver;

namespace {
void drain() {
  void* f = test::simulated_driver_symbol("fake_cuda_drain");
  REQUIRE(f);
  reinterpret_cast<void (*)()>(f)();
}

// A graph and its executable, destroyed at the end of the scope.
struct replayable {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  // Instantiated in `ctx`, made current here: the driver instantiates in the current context (as the real one does,
  // the simulator answers CUDA_ERROR_INVALID_CONTEXT without one).
  replayable(CUgraph g, CUcontext ctx) : graph(g) {
    REQUIRE(g);
    const scoped_context current(ctx);
    REQUIRE(driver().cuGraphInstantiateWithFlags(&exec, g, 0) == CUDA_SUCCESS);
  }
  ~replayable() {
    driver().cuGraphExecDestroy(exec);
    driver().cuGraphDestroy(graph);
  }
  std::vector<CUgraphNodeType> node_types() const {
    std::size_t n = 0;
    REQUIRE(driver().cuGraphGetNodes(graph, nullptr, &n) == CUDA_SUCCESS);
    std::vector<CUgraphNode> nodes(n);
    REQUIRE(driver().cuGraphGetNodes(graph, nodes.data(), &n) == CUDA_SUCCESS);
    std::vector<CUgraphNodeType> types(n);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(driver().cuGraphNodeGetType(nodes[i], &types[i]) == CUDA_SUCCESS);
    return types;
  }
};

CUgraph end_capture(stream_ref s, CUresult expected = CUDA_SUCCESS) {
  CUgraph g = nullptr;
  CHECK(driver().cuStreamEndCapture(s.get(), &g) == expected);
  if (expected != CUDA_SUCCESS) CHECK(g == nullptr);
  return g;
}

struct fixture {
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  module m = module::load(ctx, std::string_view(test::sim_u32_ptx), "capture.ptx");
  device_buffer b = device_buffer::allocate(ctx, 4 * sizeof(std::uint32_t));
  pinned_buffer host = pinned_buffer::allocate(ctx, 4 * sizeof(std::uint32_t));
  std::span<std::uint32_t> out() const { return host.as_span<std::uint32_t>(); }
};
}  // namespace

TEST_CASE("a capturing stream's memsets, launches and pinned copies become a graph that replays them",
          "[.simulated][driver][capture]") {
  CUASYNC_SIMULATED_ONLY();
  fixture f;
  std::memset(f.host.get(), 0xee, 16);
  REQUIRE(driver().cuStreamBeginCapture(f.s.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  memset_async(f.s, f.b.span(), 0);
  launch(f.s, f.m.kernel("sim_add_u32"), {.grid = 1, .block = 4}, f.b.get(), 4u, 5u);
  copy_async(f.s, f.out(), f.b.span());
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  drain();
  CHECK(f.out()[0] == 0xeeeeeeeeu);  // captured, not run
  replayable g(end_capture(f.s), f.ctx.get());
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(g.node_types() ==
        std::vector{CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_MEMCPY});
  for (int round = 0; round < 3; ++round) {  // the memset makes each replay start from 0
    std::memset(f.host.get(), 0, 16);
    REQUIRE(driver().cuGraphLaunch(g.exec, f.s.get()) == CUDA_SUCCESS);
    f.s.synchronize();
    CHECK(std::vector(f.out().begin(), f.out().end()) == std::vector<std::uint32_t>{5, 5, 5, 5});
  }
}

TEST_CASE("an event recorded in a capture joins the stream that waits on it", "[.simulated][driver][capture]") {
  CUASYNC_SIMULATED_ONLY();
  fixture f;
  stream s2 = stream::create(f.ctx);
  event forked = event::create(f.ctx), joined = event::create(f.ctx);
  REQUIRE(driver().cuStreamBeginCapture(f.s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  launch(f.s, f.m.kernel("sim_fill_u32"), {.grid = 1, .block = 4}, f.b.get(), 4u, 7u);
  forked.record(f.s);
  CHECK(test::capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  s2.wait(forked);
  CHECK(test::capture_status(s2) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  launch(s2, f.m.kernel("sim_add_u32"), {.grid = 1, .block = 4}, f.b.get(), 4u, 2u);
  joined.record(s2);

  SECTION("joined back, the graph holds both streams' work in order") {
    f.s.wait(joined);
    copy_async(f.s, f.out(), f.b.span());
    replayable g(end_capture(f.s), f.ctx.get());
    CHECK(test::capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK(g.node_types().size() == 3);
    REQUIRE(driver().cuGraphLaunch(g.exec, s2.get()) == CUDA_SUCCESS);  // any stream may launch it
    s2.synchronize();
    CHECK(std::vector(f.out().begin(), f.out().end()) == std::vector<std::uint32_t>{9, 9, 9, 9});
  }
  SECTION("never joined back, the end answers UNJOINED") { end_capture(f.s, CUDA_ERROR_STREAM_CAPTURE_UNJOINED); }
  SECTION("only the stream that began it may end it") {
    end_capture(s2, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    CHECK(driver().cuStreamWaitEvent(f.s.get(), joined.get(), 0) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    end_capture(f.s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  SECTION("cuStreamGetCaptureInfo (_v2 and _v3) names the same capture on both streams") {
    auto get_proc = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t,
                                                  CUdriverProcAddressQueryResult*)>(
        test::simulated_driver_symbol("cuGetProcAddress_v2"));
    REQUIRE(get_proc);
    void *v2 = nullptr, *v3 = nullptr;
    CUdriverProcAddressQueryResult q{};
    REQUIRE(get_proc("cuStreamGetCaptureInfo", &v2, 11030, 0, &q) == CUDA_SUCCESS);
    REQUIRE(get_proc("cuStreamGetCaptureInfo", &v3, 12030, 0, &q) == CUDA_SUCCESS);
    CHECK(v2 != v3);
    using info_v2 = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                                 size_t*);
    using info_v3 = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                                 const CUgraphEdgeData**, size_t*);
    CUstreamCaptureStatus st1{}, st2{};
    cuuint64_t id1 = 0, id2 = 0;
    std::size_t deps = 9;
    const CUgraphEdgeData* edges = reinterpret_cast<const CUgraphEdgeData*>(1);
    REQUIRE(reinterpret_cast<info_v2>(v2)(f.s.get(), &st1, &id1, nullptr, nullptr, &deps) == CUDA_SUCCESS);
    CHECK(deps == 1);
    REQUIRE(reinterpret_cast<info_v3>(v3)(s2.get(), &st2, &id2, nullptr, nullptr, &edges, nullptr) == CUDA_SUCCESS);
    CHECK(st1 == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(st2 == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(id1 == id2);
    CHECK(id1 != 0);
    CHECK(edges == nullptr);
    f.s.wait(joined);
    replayable g(end_capture(f.s), f.ctx.get());
  }
}

TEST_CASE("what the driver forbids during a capture invalidates it", "[.simulated][driver][capture]") {
  CUASYNC_SIMULATED_ONLY();
  fixture f;
  event outside = event::create(f.ctx), inside = event::create(f.ctx);
  outside.record(f.s);
  f.s.synchronize();
  const CUstream s = f.s.get();
  const auto& api = driver();
  REQUIRE(api.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  inside.record(f.s);
  CUresult refused = CUDA_SUCCESS;
  SECTION("a query of the capturing stream") { refused = api.cuStreamQuery(s); }
  SECTION("a synchronize of the capturing stream") { refused = api.cuStreamSynchronize(s); }
  SECTION("a query of an event recorded in the capture") {
    refused = api.cuEventQuery(inside.get());
    CHECK(refused == CUDA_ERROR_CAPTURED_EVENT);
  }
  SECTION("a wait on an event recorded outside the capture") {
    refused = api.cuStreamWaitEvent(s, outside.get(), 0);
    CHECK(refused == CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  }
  SECTION("a copy from pageable memory") {
    std::vector<std::uint32_t> pageable(4, 1);
    refused = api.cuMemcpyHtoDAsync(f.b.get(), pageable.data(), 16, s);
  }
  SECTION("work on the legacy stream while a blocking stream captures") {
    stream blocking = stream::create(f.ctx, {.non_blocking = false});
    replayable first(end_capture(f.s), f.ctx.get());  // one capture at a time here
    REQUIRE(api.cuStreamBeginCapture(blocking.get(), CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    scoped_context current(f.ctx.get());  // the legacy stream is the current context's
    refused = api.cuMemsetD8Async(f.b.get(), 0, 16, CU_STREAM_LEGACY);
    CHECK(refused == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CHECK(test::capture_status(blocking) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    end_capture(blocking, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    return;
  }
  SECTION("an allocation or an event query on this thread, or on another in global mode") {
    CUdeviceptr p = 0;
    SECTION("this thread") {
      scoped_context current(f.ctx.get());
      refused = api.cuMemAlloc(&p, 64);
    }
    SECTION("another thread, global mode") {
      std::thread([&] { refused = api.cuEventQuery(outside.get()); }).join();
    }
    CHECK(refused == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }
  SECTION("but not a relaxed thread's, nor a global capture's own stream-ordered work") {
    CUresult other = CUDA_ERROR_UNKNOWN;
    std::thread([&] {
      thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED);
      other = api.cuEventQuery(outside.get());
    }).join();
    CHECK(other == CUDA_SUCCESS);
    memset_async(f.s, f.b.span(), 1);
    CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    replayable g(end_capture(f.s), f.ctx.get());
    return;
  }
  CHECK(refused != CUDA_SUCCESS);
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(api.cuMemsetD8Async(f.b.get(), 0, 16, s) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);  // work after it
  end_capture(f.s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(api.cuStreamQuery(s) == CUDA_SUCCESS);  // an ordinary stream again
}

TEST_CASE("a thread-local capture ignores other threads' unsafe calls", "[.simulated][driver][capture]") {
  CUASYNC_SIMULATED_ONLY();
  fixture f;
  REQUIRE(driver().cuStreamBeginCapture(f.s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  CUresult other = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    scoped_context current(f.ctx.get());
    CUdeviceptr p = 0;
    other = driver().cuMemAlloc(&p, 64);
    if (other == CUDA_SUCCESS) driver().cuMemFree(p);
  }).join();
  CHECK(other == CUDA_SUCCESS);
  CHECK(test::capture_status(f.s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  replayable g(end_capture(f.s), f.ctx.get());
  CHECK(g.node_types().empty());
}
