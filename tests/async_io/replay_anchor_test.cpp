// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Awaitable replays (engine/replay_anchor.hpp, async_io/async_replay.hpp): a graph that the test captures and
// launches itself, as a framework would (cuasync never sees the launches), awaited once per replay through the
// anchor marked in it: never early (a gate kernel in the graph holds each replay), none lost (several generations
// reached between passes complete every waiter, in order), a fault in replay k reaching the waiters of k and later
// (in a child process: the context is unusable afterwards). The kit picks the simulated driver's gate and counter
// kernels (by name) or the test kernels on a GPU, so the [gpu] cases run on either; the [.simulated] ones (CTest
// async_io_misuse_simulated) are the smaller runs for CI.
#include <cuasync/async_io/async_replay.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/graph.hpp>

#include "child_process.hpp"
#include "gpu.hpp"
#include "own_context.hpp"
#include "sim_capture.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;

namespace {

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

// A gate and a counter, as kernels of the driver in use: the simulated driver's by name, the test kernels on a GPU.
struct replay_kit {
  bool sim = test::simulated_driver_loaded();
  context_ref ctx = test::ctx();
  module sim_gate, sim_u32;
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(int));
  pinned_buffer count = pinned_buffer::allocate(ctx, sizeof(int));
  const launch_config one{.grid = 1, .block = 1};

  replay_kit() {
    if (sim) {
      sim_gate = module::load(ctx, std::string_view(test::sim_gate_ptx), "replay_gate.ptx");
      sim_u32 = module::load(ctx, std::string_view(test::sim_u32_ptx), "replay_u32.ptx");
    }
    close();
    *count.data<int>() = 0;
  }
  ~replay_kit() { open(); }
  // A replay holds at its gate until the flag is set.
  void gate(stream_ref s) const {
    if (sim)
      launch(s, sim_gate.kernel("sim_wait_u32"), one, flag.data<unsigned>());
    else
      launch(s, test::kernels().kernel("spin_until_flag"), one, flag.data<int>());
  }
  void add_one(stream_ref s) const {
    if (sim)
      launch(s, sim_u32.kernel("sim_add_u32"), one, count.data<unsigned>(), 1u, 1u);
    else
      launch(s, test::kernels().kernel("add_value"), one, count.data<int>(), 1, 1);
  }
  // The graph [gate, +1, mark], captured on `s`; `anchor` is its mark.
  runtime::graph_exec capture(stream_ref s, replay_anchor& anchor) const {
    runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
      gate(st);
      add_one(st);
      anchor = replay_anchor::mark(st);
    });
    return g.instantiate();
  }
  void close() { std::atomic_ref(*flag.data<int>()).store(0); }
  void open() { std::atomic_ref(*flag.data<int>()).store(1); }
  int counted() const { return std::atomic_ref(*count.data<int>()).load(); }
};

// `replays` replays of [gate, +1, mark], each awaited through the anchor after its launch; every `probe_every`-th
// one is also awaited while its gate is still closed, by a waiter that must not complete before the gate opens.
void awaits_each_replay(int replays, int probe_every) {
  replay_kit kit;
  stream s = stream::create(kit.ctx);
  replay_anchor anchor;
  const runtime::graph_exec exec = kit.capture(s, anchor);
  REQUIRE(anchor.generation() == 0);
  int completed = 0, early = 0, premature = 0;
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        for (int i = 1; i <= replays; ++i) {
          kit.close();
          exec.launch(s);
          const auto n = static_cast<std::uint64_t>(i);
          CHECK(anchor.next() == n);
          if (i % probe_every == 1) {
            auto seen = std::make_shared<bool>(false);
            asio::co_spawn(
                io, [&anchor, n, seen]() -> asio::awaitable<void> {
                  co_await async_wait_replay(anchor, n);
                  *seen = true;
                },
                rethrow);
            timer.expires_after(2ms);
            co_await timer.async_wait(asio::use_awaitable);
            if (*seen) ++premature;
          }
          kit.open();
          co_await async_wait_replay(anchor, n);
          ++completed;
          if (kit.counted() != i || anchor.generation() < n) ++early;
        }
      },
      rethrow);
  io.run();
  CHECK(completed == replays);
  CHECK(early == 0);
  CHECK(premature == 0);
  CHECK(anchor.generation() == static_cast<std::uint64_t>(replays));
}

// Replays launched behind a closed gate, waiters for each and for generations already reached: every waiter
// completes once, in generation order, none before its replay. Few enough that the launches never fill the stream's
// hardware queue behind the gate (a launch would then wait for the GPU, which waits for the gate: 64 graphs of four
// nodes are well under the 1,021 entries of a connection).
void completes_every_generation(int replays) {
  replay_kit kit;
  stream s = stream::create(kit.ctx);
  replay_anchor anchor;
  const runtime::graph_exec exec = kit.capture(s, anchor);
  asio::io_context io;
  std::vector<std::uint64_t> order;
  int failed = 0, early = 0;
  auto waiter = [&](std::uint64_t n) {
    return [&, n](std::error_code ec) {
      order.push_back(n);
      if (ec) ++failed;
      if (anchor.generation() < n || kit.counted() < static_cast<int>(n)) ++early;
    };
  };
  for (int i = 0; i < replays; ++i) exec.launch(s);
  for (int i = 1; i <= replays; ++i)
    async_wait_replay(anchor, static_cast<std::uint64_t>(i), asio::bind_executor(io, waiter(i)));
  io.run_for(20ms);  // the gate holds the first replay: nothing may complete
  CHECK(order.empty());
  CHECK(anchor.generation() == 0);
  kit.open();  // every replay runs now, several between two passes
  io.restart();
  io.run();
  REQUIRE(order.size() == static_cast<std::size_t>(replays));
  for (int i = 0; i < replays; ++i) CHECK(order[i] == static_cast<std::uint64_t>(i + 1));
  CHECK(failed == 0);
  CHECK(early == 0);
  CHECK(anchor.generation() == static_cast<std::uint64_t>(replays));
  // Generations reached long ago complete at once; the next one waits for its replay.
  order.clear();
  for (int i = 1; i <= replays; i += 7)
    async_wait_replay(anchor, static_cast<std::uint64_t>(i), asio::bind_executor(io, waiter(i)));
  bool next_done = false;
  async_wait_replay(anchor, anchor.next(), asio::bind_executor(io, [&](std::error_code ec) {
                      CHECK(!ec);
                      next_done = true;
                    }));
  io.restart();
  io.run_for(20ms);
  CHECK(order.size() == static_cast<std::size_t>((replays + 6) / 7));
  CHECK_FALSE(next_done);
  exec.launch(s);
  io.restart();
  io.run();
  CHECK(next_done);
  CHECK(kit.counted() == replays + 1);
}

// A wait started inside the capture, polled there with a fault check at every pass (the event whose record node the
// capture holds is queried while the capture goes on): the capture stays valid, and the wait completes at the first
// replay.
void waits_from_inside_the_capture() {
  replay_kit kit;
  kit.open();
  stream s = stream::create(kit.ctx);
  asio::io_context io;
  bool done = false;
  std::error_code result;
  CUstreamCaptureStatus after_polling = CU_STREAM_CAPTURE_STATUS_NONE;
  replay_anchor anchor;
  runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
    kit.add_one(st);
    anchor = replay_anchor::mark(st, replay_anchor::options{.fault_check = std::chrono::nanoseconds(0)});
    async_wait_replay(anchor, 1, asio::bind_executor(io, [&](std::error_code ec) {
                        result = ec;
                        done = true;
                      }));
    io.run_for(20ms);  // passes (on this thread, the capturing one) while the capture is under way
    after_polling = test::capture_status(st);
  });
  CHECK(after_polling == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK_FALSE(done);
  const runtime::graph_exec exec = g.instantiate();
  exec.launch(s);
  io.restart();
  io.run();
  CHECK(done);
  CHECK_FALSE(result);
  CHECK(kit.counted() == 1);
}

}  // namespace

TEST_CASE("replay_anchor::mark refuses a stream that is not being captured", "[async_io][replay][gpu]") {
  stream s = stream::create(test::ctx());
  CHECK_THROWS_WITH(replay_anchor::mark(s), Catch::Contains("cuasync::replay_anchor::mark") &&
                                                Catch::Contains("is not being captured"));
  CHECK_THROWS_WITH(async_wait_replay(replay_anchor{}, 1, [](std::error_code) {}),
                    Catch::Contains("the anchor is empty"));
}

TEST_CASE("a captured region's replays are awaited once each, none early, 1,000 replays (simulated)",
          "[.simulated][replay]") {
  CUASYNC_SIMULATED_ONLY();
  awaits_each_replay(1'000, 100);
}

TEST_CASE("a captured region's replays are awaited once each, none early, 10,000 replays", "[async_io][replay][gpu]") {
  awaits_each_replay(10'000, 1'000);
}

TEST_CASE("replays that land between passes complete every generation's waiters, in order (simulated)",
          "[.simulated][replay]") {
  CUASYNC_SIMULATED_ONLY();
  completes_every_generation(64);
}

TEST_CASE("replays that land between passes complete every generation's waiters, in order", "[async_io][replay][gpu]") {
  completes_every_generation(64);
}

TEST_CASE("replay anchor fault child", "[.replay_anchor_fault_child]") {
  CUASYNC_CHILD_ONLY();
  const bool sim = test::simulated_driver_loaded();
  context_ref ctx = test::ctx();
  stream s = stream::create(ctx);
  const launch_config one{.grid = 1, .block = 1};
  pinned_buffer out = pinned_buffer::allocate(ctx, sizeof(int));
  device_buffer target = device_buffer::allocate(ctx, 4 * sizeof(unsigned));
  module sim_u32;
  if (sim) sim_u32 = module::load(ctx, std::string_view(test::sim_u32_ptx), "replay_fault.ptx");
  replay_anchor anchor;
  runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
    if (sim)
      launch(st, sim_u32.kernel("sim_add_u32"), one, target.data<unsigned>(), 1u, 1u);
    else
      launch(st, test::kernels().kernel("write_to"), one, out.data<int>(), 0);
    anchor = replay_anchor::mark(st);
  });
  runtime::graph_exec exec = g.instantiate();
  constexpr int replays = 6, faulting = 4;  // generation 4 faults
  REQUIRE(exec.kernel_node_count() == 2);  // the kernel, then the anchor's bump
  for (int i = 1; i <= replays; ++i) {
    try {
      if (i == faulting) {
        s.synchronize();  // replays before it are done
        if (sim)
          target = device_buffer{};  // its kernel now adds through freed memory
        else
          exec.set_kernel_arguments(0, reinterpret_cast<int*>(0x10), i);  // nothing is mapped there
      } else if (!sim) {
        exec.set_kernel_arguments(0, out.data<int>(), i);
      }
      exec.launch(s);
    } catch (const cuda_error& e) {
      std::printf("CHILD launch %d: %s\n", i, e.code().message().c_str());  // the fault may be seen here already
    }
  }
  asio::io_context io;
  for (int n = 1; n <= replays; ++n)
    asio::co_spawn(
        io,
        [&, n]() -> asio::awaitable<void> {
          try {
            co_await async_wait_replay(anchor, static_cast<std::uint64_t>(n));
            std::printf("CHILD generation %d: ok\n", n);
          } catch (const cuda_error& e) {
            std::printf("CHILD generation %d: %s | %s\n", n, e.code().message().c_str(), e.what());
          }
        },
        rethrow);
  io.run();
  std::printf("CHILD done at generation %llu\n", static_cast<unsigned long long>(anchor.generation()));
  std::fflush(stdout);
}

namespace {
void fault_reaches_its_waiters() {
  auto r = test::run_child({"replay anchor fault child"}, {}, std::chrono::seconds(60));
  INFO(r.output);
  CHECK_FALSE(r.timed_out);
  for (int n = 1; n <= 3; ++n) CHECK_THAT(r.output, Catch::Contains("CHILD generation " + std::to_string(n) + ": ok"));
  for (int n = 4; n <= 6; ++n) {
    CHECK_THAT(r.output, Catch::Contains("CHILD generation " + std::to_string(n) + ": CUDA_ERROR_ILLEGAL_ADDRESS"));
    CHECK_THAT(r.output, !Catch::Contains("CHILD generation " + std::to_string(n) + ": ok"));
  }
  CHECK_THAT(r.output, Catch::Contains("cuasync::async_wait_replay") && Catch::Contains("replay_anchor_test.cpp"));
  CHECK_THAT(r.output, Catch::Contains("CHILD done at generation 3"));
}
}  // namespace

TEST_CASE("a fault in replay k reaches the waiters of generation k and later (simulated)", "[.simulated][replay]") {
  CUASYNC_SIMULATED_ONLY();
  fault_reaches_its_waiters();
}

TEST_CASE("a fault in replay k reaches the waiters of generation k and later", "[async_io][replay][fault][gpu]") {
  fault_reaches_its_waiters();
}

TEST_CASE("a wait started inside the capture leaves it valid and completes at the first replay (simulated)",
          "[.simulated][replay]") {
  CUASYNC_SIMULATED_ONLY();
  waits_from_inside_the_capture();
}

TEST_CASE("a wait started inside the capture leaves it valid and completes at the first replay",
          "[async_io][replay][gpu]") {
  waits_from_inside_the_capture();
}

TEST_CASE("after prepare, a mark inside a capture loads no module there (simulated)", "[.simulated][replay]") {
  CUASYNC_SIMULATED_ONLY();
  using calls_fn = long (*)(const char*);
  const auto calls = reinterpret_cast<calls_fn>(test::simulated_driver_symbol("fake_cuda_calls_on_this_thread"));
  REQUIRE(calls);
  // A context of its own: the bump's module is loaded once per context, so no earlier case has loaded it here.
  test::own_context own;
  {
    const context_ref ctx = own.ref();
    replay_anchor::prepare(ctx);
    stream s = stream::create(ctx);
    long loads = -1;
    replay_anchor anchor;
    runtime::graph g = runtime::graph::capture(s, [&](stream_ref st) {
      const long before = calls("cuModuleLoadDataEx");
      anchor = replay_anchor::mark(st);
      loads = calls("cuModuleLoadDataEx") - before;
    });
    CHECK(loads == 0);
  }
}
