// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A fault on one GPU, or a peer that never comes, reaches every waiter of the collective, and nothing hangs: the
// fault domain is aborted. Each runs in a child process (a faulted context is lost for the rest of the process).
#include "collective_checks.hpp"

#include <cuasync/collectives/unique_id_exchange.hpp>
#include <cuasync/driver/launch.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "gpu.hpp"

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>
#include <unistd.h>

using namespace cuasync;
using namespace cuasync::collectives;
using namespace std::chrono_literals;

namespace {

// What a waiter saw, as one line: "WAITER <rank, or 2 for the wait on both> <error code> | <message>".
void report(int rank, std::future<void>& f) {
  try {
    f.get();
    std::printf("WAITER %d succeeded\n", rank);
  } catch (const cuda_error& e) {
    std::printf("WAITER %d %s:%d | %s\n", rank, e.code().category().name(), e.code().value(), e.what());
  }
}

// Children write unbuffered, with a line per step: one that times out shows where it stopped.
void unbuffered() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::setvbuf(stderr, nullptr, _IONBF, 0);
}

// Ends the child without static teardown (aborted communicators and a faulted context may hang it).
[[noreturn]] void leave() {
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

}  // namespace

TEST_CASE("collective fault child", "[.collective_fault_child]") {
  CUASYNC_CHILD_ONLY();
  unbuffered();
  auto comms = communicator::init_all(std::vector<int>{0, 1});
  auto ranks = test::local_ranks(comms);
  std::vector<runtime::tracked_buffer> bufs;
  for (auto& r : ranks) bufs.push_back(test::from_formula(r, std::size_t{1} << 24, r.comm->rank()));
  // Once without a fault first: NCCL connects the ranks at a communicator's first collective, inside ncclGroupEnd,
  // and that would wait for device 1's gated stream below (a deadlock of the test, not the fault it is after).
  test::grouped(ranks, [&](test::local_rank& r) {
    const auto k = static_cast<std::size_t>(&r - ranks.data());
    all_reduce(*r.comm, bufs[k], bufs[k], data_type::float32, reduce_op::sum, r.s);
  });
  std::printf("STEP connected\n");
  // Device 1 faults while both ranks' parts are in flight: its stream holds a gate, then a trapping kernel, then
  // its part of the all-reduce; device 0's part waits for device 1's forever unless the domain is aborted.
  test::gate g;
  g.close(ranks[1].s);
  launch(ranks[1].s, test::kernels(ranks[1].rt->context()).kernel("trap_kernel"), {.grid = 1, .block = 1});
  const auto start = std::chrono::steady_clock::now();
  {
    group grp;
    for (std::size_t k = 0; k < 2; ++k)
      all_reduce(comms[k], bufs[k], bufs[k], data_type::float32, reduce_op::sum, ranks[k].s);
    grp.end();
  }
  std::printf("STEP issued behind the gate\n");
  auto f0 = async_wait_collective(comms[0], ranks[0].s, boost::asio::use_future);
  auto f1 = async_wait_collective(comms[1], ranks[1].s, boost::asio::use_future);
  // And one wait for both parts: rank 0's stays pending (it waits for rank 1), the fault is in rank 1's.
  const std::vector<rank_part> parts{{comms[0], ranks[0].s}, {comms[1], ranks[1].s}};
  auto both = async_wait_collectives(parts, boost::asio::use_future);
  std::this_thread::sleep_for(100ms);  // the waits are pending in the engine
  g.open();
  report(0, f0);
  report(1, f1);
  report(2, both);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("ELAPSED %lld ms\nFAULT %s | %s\n", static_cast<long long>(ms.count()), comms[0].fault().message().c_str(),
              comms[0].fault_detail().c_str());
  leave();
}

TEST_CASE("a fault on one GPU reaches the waiters of its collective on both, without a hang",
          "[collectives][multi_gpu][gpu][fault]") {
  if (!test::devices_at_least(2)) return;
  const auto c = test::run_child({"collective fault child"}, {}, std::chrono::seconds(60));
  UNSCOPED_INFO("child output:\n" << c.output);
  REQUIRE_FALSE(c.timed_out);
  CHECK(c.exit_code == 0);
  // Both failed (with the device's error, or NCCL's if its own thread saw the fault first), none succeeded.
  CHECK_THAT(c.output, Catch::Contains("WAITER 0 cuda:") || Catch::Contains("WAITER 0 nccl:"));
  CHECK_THAT(c.output, Catch::Contains("WAITER 1 cuda:") || Catch::Contains("WAITER 1 nccl:"));
  CHECK_THAT(c.output, Catch::Contains("WAITER 2 cuda:") || Catch::Contains("WAITER 2 nccl:"));  // both parts
  CHECK_THAT(c.output, Catch::Contains("ncclAllReduce") || Catch::Contains("collective on rank"));
  CHECK_THAT(c.output, Catch::Contains("FAULT") && Catch::Contains("of 2 on device"));
}

// Rank 0 of a per-process pair whose rank 1 joins the communicator but never calls the collective.
TEST_CASE("collective timeout child", "[.collective_timeout_child]") {
  CUASYNC_CHILD_ONLY();
  unbuffered();
  const int rank = std::atoi(std::getenv("CUASYNC_TEST_RANK"));
  const char* path = std::getenv("CUASYNC_TEST_SOCKET");
  const unique_id id = exchange_unique_id(rank, 2, path, 60s);
  std::vector<communicator> comms;
  comms.push_back(communicator::init_rank(id, 2, rank, rank, {.timeout = 2000ms}));
  auto ranks = test::local_ranks(comms);
  auto buf = test::from_formula(ranks[0], 1 << 20, rank);
  // Both ranks once: the first collective connects the ranks on the host (NCCL's runtime connection), and a rank
  // whose peer never comes to that would wait inside the NCCL call, where no timeout of ours reaches it (scale-out.md).
  async_all_reduce(comms[0], buf, buf, data_type::float32, reduce_op::sum, ranks[0].s, boost::asio::use_future).get();
  std::printf("STEP connected\n");
  if (rank == 1) {
    std::this_thread::sleep_for(8s);  // alive, silent: rank 0 must not wait for it forever
    leave();
  }
  const auto start = std::chrono::steady_clock::now();
  auto f = async_all_reduce(comms[0], buf, buf, data_type::float32, reduce_op::sum, ranks[0].s, boost::asio::use_future);
  report(0, f);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("ELAPSED %lld ms\nFAULT %s | %s\n", static_cast<long long>(ms.count()), comms[0].fault().message().c_str(),
              comms[0].fault_detail().c_str());
  leave();
}

TEST_CASE("a rank whose peer never joins the collective fails after its timeout, aborted",
          "[collectives][multi_gpu][gpu][fault]") {
  if (!test::devices_at_least(2)) return;
  const auto children = test::run_two_ranks("collective timeout child", std::chrono::seconds(60));
  const test::child_result& r0 = children[0];
  UNSCOPED_INFO("rank 0 output:\n" << r0.output);
  REQUIRE_FALSE(r0.timed_out);
  CHECK_THAT(r0.output, Catch::Contains("WAITER 0 generic:" + std::to_string(ETIMEDOUT)));
  CHECK_THAT(r0.output, Catch::Contains("still pending after 2000 ms"));
}
