// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Collectives on two GPUs against CPU references: one process driving both, and one process per GPU (this
// executable re-run as two ranks that meet through the Unix-socket id exchange).
#include "collective_checks.hpp"

#include <cuasync/collectives/unique_id_exchange.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "gpu.hpp"

#include <cstdlib>
#include <future>
#include <thread>
#include <unistd.h>

using namespace cuasync;
using namespace cuasync::collectives;

namespace {
constexpr std::size_t count = 2 * 65539;  // odd per rank, divisible by 2 ranks
}

TEST_CASE("every collective matches the CPU reference, one process driving both GPUs",
          "[collectives][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  auto comms = communicator::init_all(std::vector<int>{0, 1});
  REQUIRE(comms.size() == 2);
  CHECK(comms[1].rank() == 1);
  CHECK(comms[1].size() == 2);
  CHECK(comms[1].device() == 1);
  auto ranks = test::local_ranks(comms);
  const auto failures = test::check_every_collective(ranks, count);
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
  CHECK_FALSE(comms[0].fault());
}

TEST_CASE("every collective matches the CPU reference on every device there is, one wait per collective",
          "[collectives][gpu]") {
  if (!test::devices_at_least(1)) return;  // one GPU too: a communicator of one rank, send/recv to itself
  std::vector<int> devices(static_cast<std::size_t>(device::count()));
  for (std::size_t i = 0; i < devices.size(); ++i) devices[i] = static_cast<int>(i);
  auto comms = communicator::init_all(devices);
  auto ranks = test::local_ranks(comms);
  const auto failures = test::check_every_collective(ranks, 24 * 1031);  // divisible by 1, 2, 3, 4, 6 and 8 ranks
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
}

TEST_CASE("a collective awaited alone completes through the engine", "[collectives][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  auto comms = communicator::init_all(std::vector<int>{0, 1});
  auto ranks = test::local_ranks(comms);
  std::vector<runtime::tracked_buffer> bufs;
  for (auto& r : ranks) bufs.push_back(test::from_formula(r, 1024, r.comm->rank()));
  // Inside a group the per-call awaitables refuse (the collective is issued only when the group ends).
  {
    group g;
    CHECK_THROWS_WITH(async_all_reduce(comms[0], bufs[0], bufs[0], data_type::float32, reduce_op::sum, ranks[0].s,
                                       boost::asio::use_future),
                      Catch::Contains("inside an open group"));
    for (std::size_t k = 0; k < 2; ++k)
      all_reduce(comms[k], bufs[k], bufs[k], data_type::float32, reduce_op::sum, ranks[k].s);
    g.end();
  }
  auto f0 = async_wait_collective(comms[0], ranks[0].s, boost::asio::use_future);
  auto f1 = async_wait_collective(comms[1], ranks[1].s, boost::asio::use_future);
  f0.get();
  f1.get();
  const auto got = test::to_host(ranks[1], bufs[1]);
  CHECK(got[5] == test::input(0, 5) + test::input(1, 5));
}

TEST_CASE("one wait covers every rank's part of a grouped collective", "[collectives][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  auto comms = communicator::init_all(std::vector<int>{0, 1});
  auto ranks = test::local_ranks(comms);
  std::vector<runtime::tracked_buffer> bufs;
  for (auto& r : ranks) bufs.push_back(test::from_formula(r, 1024, r.comm->rank()));
  auto issue = [&](test::local_rank& r) {
    const auto k = static_cast<std::size_t>(&r - ranks.data());
    all_reduce(*r.comm, bufs[k], bufs[k], data_type::float32, reduce_op::sum, r.s);
  };
  test::grouped(ranks, issue);  // the first collective also connects the ranks (inside ncclGroupEnd)
  // Rank 1's part waits behind a gate: the one wait must not complete before it.
  test::gate g;
  g.close(ranks[1].s);
  {
    group grp;
    for (auto& r : ranks) issue(r);
    grp.end();
  }
  auto f = async_wait_collectives({{comms[0], ranks[0].s}, {comms[1], ranks[1].s}}, boost::asio::use_future);
  CHECK(f.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
  g.open();
  f.get();
  for (auto& r : ranks) {
    const auto k = static_cast<std::size_t>(&r - ranks.data());
    CHECK(test::to_host(r, bufs[k])[5] == 2 * (test::input(0, 5) + test::input(1, 5)));
  }
  // Parts of two fault domains: each domain fails on its own, so one wait cannot stand for both.
  auto other = communicator::init_all(std::vector<int>{0, 1});
  const std::vector<rank_part> mixed{{comms[0], ranks[0].s}, {other[1], ranks[1].s}};
  CHECK_THROWS_WITH(async_wait_collectives(mixed, boost::asio::use_future), Catch::Contains("not one fault domain"));
}

// One rank of the one-process-per-GPU test; run by the test below with CUASYNC_TEST_RANK and CUASYNC_TEST_SOCKET.
TEST_CASE("collectives rank child", "[.collectives_rank_child]") {
  CUASYNC_CHILD_ONLY();
  const char* rank_s = std::getenv("CUASYNC_TEST_RANK");
  const char* path = std::getenv("CUASYNC_TEST_SOCKET");
  REQUIRE(rank_s);
  REQUIRE(path);
  const int rank = std::atoi(rank_s);
  const unique_id id = exchange_unique_id(rank, 2, path, std::chrono::seconds(60));
  std::vector<communicator> comms;
  comms.push_back(communicator::init_rank(id, 2, rank, rank));
  auto ranks = test::local_ranks(comms);
  // Awaited one by one too: with one rank per process no group is needed.
  auto buf = test::from_formula(ranks[0], 4096, rank);
  auto f = async_all_reduce(comms[0], buf, buf, data_type::float32, reduce_op::sum, ranks[0].s, boost::asio::use_future);
  f.get();
  CHECK(test::to_host(ranks[0], buf)[7] == test::input(0, 7) + test::input(1, 7));
  const auto failures = test::check_every_collective(ranks, count);
  for (const auto& fl : failures) UNSCOPED_INFO(fl);
  CHECK(failures.empty());
  std::printf("RANK %d OK %s\n", rank, failures.empty() ? "matched" : "MISMATCH");
}

TEST_CASE("every collective matches the CPU reference, one process per GPU", "[collectives][multi_gpu][gpu]") {
  if (!test::devices_at_least(2)) return;
  const auto children = test::run_two_ranks("collectives rank child", std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    const test::child_result& c = children[r];
    UNSCOPED_INFO("rank " << r << " output:\n" << c.output);
    CHECK_FALSE(c.timed_out);
    CHECK(c.exit_code == 0);
    CHECK_THAT(c.output, Catch::Contains("RANK " + std::to_string(r) + " OK matched"));
  }
}
