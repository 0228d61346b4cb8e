// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/memcpy_team.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <chrono>
#include <cstring>
#include <future>
#include <memory>

TEST_CASE("the memcpy team copies every byte at odd sizes and offsets", "[runtime][staged]") {
  cuasync::runtime::memcpy_team team(4);
  CHECK(team.size() == 4);
  const auto src = cuasync::test::random_bytes((9 << 20) + 64, 99);
  for (std::size_t size : {std::size_t{1}, std::size_t{300}, std::size_t{(256 << 10) + 5}, std::size_t{(9 << 20) + 7}}) {
    for (std::size_t src_off : {0, 3}) {
      for (std::size_t dst_off : {0, 5, 16}) for (bool streaming : {false, true}) {
        CAPTURE(size, src_off, dst_off, streaming);
        std::vector<std::byte> dst(size + 48, std::byte{0x7e});
        team.copy(dst.data() + dst_off, src.data() + src_off, size, streaming);
        REQUIRE(std::memcmp(dst.data() + dst_off, src.data() + src_off, size) == 0);
        if (dst_off) REQUIRE(dst[dst_off - 1] == std::byte{0x7e});
        REQUIRE(dst[dst_off + size] == std::byte{0x7e});
      }
    }
  }
}

TEST_CASE("a memcpy team destroyed inside its own done call lets that thread go and finishes what was queued",
          "[runtime][staged]") {
  for (unsigned threads : {1u, 3u}) {
    CAPTURE(threads);
    auto team = std::make_unique<cuasync::runtime::memcpy_team>(threads);
    const auto src = cuasync::test::random_bytes(1 << 20, 7);
    std::vector<std::byte> a(src.size()), b(src.size());
    // The promises live in the calls that fulfil them: a done call may still be inside set_value when this thread
    // has seen the value and moved on.
    std::promise<void> b_submitted;
    const std::shared_future<void> go = b_submitted.get_future().share();
    auto a_done = std::make_shared<std::promise<void>>();
    auto b_done = std::make_shared<std::promise<void>>();
    auto a_finished = a_done->get_future(), b_finished = b_done->get_future();
    // a's done holds its thread until b is queued, then destroys the team that calls it (as a copier's owner would).
    team->submit(a.data(), src.data(), src.size(), false, [&team, go, a_done] {
      go.wait();
      team.reset();
      a_done->set_value();
    });
    team->submit(b.data(), src.data(), src.size(), true, [b_done] { b_done->set_value(); });
    b_submitted.set_value();
    REQUIRE(a_finished.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    REQUIRE(b_finished.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    CHECK(team == nullptr);
    CHECK(std::memcmp(a.data(), src.data(), src.size()) == 0);
    CHECK(std::memcmp(b.data(), src.data(), src.size()) == 0);
  }
}

TEST_CASE("a timed submission copies every byte and reports how long its parts took", "[runtime][staged]") {
  cuasync::runtime::memcpy_team team(3);
  const auto src = cuasync::test::random_bytes((5 << 20) + 11, 7);
  std::vector<std::byte> dst(src.size());
  std::promise<std::chrono::nanoseconds> took;
  team.submit_timed(dst.data(), src.data(), src.size(), false, [&](std::chrono::nanoseconds t) { took.set_value(t); });
  const std::chrono::nanoseconds t = took.get_future().get();
  CHECK(t.count() > 0);
  CHECK(t < std::chrono::seconds(10));
  CHECK(std::memcmp(dst.data(), src.data(), src.size()) == 0);
}

TEST_CASE("a team held awake copies every job submitted one by one and stops when destroyed still held",
          "[runtime][staged]") {
  // What a staged copy does: wake the team ahead, hold it while chunks are submitted one after another, each after
  // the last is done; the team may be destroyed with a hold left (its threads spin: they must still leave).
  const auto src = cuasync::test::random_bytes(8 << 20, 7);
  std::vector<std::byte> dst(src.size());
  auto team = std::make_unique<cuasync::runtime::memcpy_team>(3);
  team->wake_ahead();
  team->hold_awake();
  constexpr std::size_t chunk = 1 << 20;
  for (std::size_t off = 0; off < src.size(); off += chunk) {
    std::promise<void> done;
    team->submit(dst.data() + off, src.data() + off, chunk, false, [&] { done.set_value(); });
    REQUIRE(done.get_future().wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  }
  CHECK(std::memcmp(dst.data(), src.data(), src.size()) == 0);
  team->release_awake();
  team->hold_awake();  // held again, then destroyed: the destructor does not wait for a release
  const auto t0 = std::chrono::steady_clock::now();
  team.reset();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}
