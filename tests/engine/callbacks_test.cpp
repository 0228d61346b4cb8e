// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The engine's own front-end: callbacks on the poller thread, never inside the call that starts the wait.
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/host_completion_source.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace std::chrono_literals;

namespace {
struct recorded final : completion_callback {
  std::promise<std::pair<std::error_code, std::thread::id>> result;
  std::atomic<int> calls{0};
  void complete(std::error_code ec) noexcept override {
    ++calls;
    result.set_value({ec, std::this_thread::get_id()});
  }
};
}  // namespace

TEST_CASE("callbacks run once on the poller thread, never inside wait()", "[engine]") {
  host_completion_source source;
  auto callbacks = completion_callbacks::create();
  const auto t = source.create();
  source.complete(t);  // done before the wait starts
  recorded cb;
  auto f = cb.result.get_future();
  callbacks->wait({&source, 1, 0, t, nullptr, 0}, &cb);
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  const auto [ec, thread] = f.get();
  CHECK_FALSE(ec);
  CHECK(thread != std::this_thread::get_id());
  CHECK(cb.calls == 1);
  callbacks->shut_down();
}

TEST_CASE("a failed token's callback gets its error; a cancelled one operation_canceled, once", "[engine]") {
  host_completion_source source;
  auto callbacks = completion_callbacks::create();
  const std::error_code fault{700, std::generic_category()};
  const auto bad = source.create(), slow = source.create();
  recorded failed, cancelled;
  auto ff = failed.result.get_future(), fc = cancelled.result.get_future();
  callbacks->wait({&source, 1, 0, bad, nullptr, 0}, &failed);
  callbacks->wait({&source, 2, 0, slow, nullptr, 0}, &cancelled);
  source.complete(bad, fault);
  REQUIRE(ff.wait_for(10s) == std::future_status::ready);
  CHECK(ff.get().first == fault);
  CHECK(callbacks->cancel(&cancelled));
  CHECK_FALSE(callbacks->cancel(&cancelled));
  REQUIRE(fc.wait_for(1s) == std::future_status::ready);
  CHECK(fc.get().first == std::errc::operation_canceled);
  CHECK(source.live(slow));  // still polled until done
  source.complete(slow);
  // The source must outlive the engine's use of its tokens: wait for the poller to release this one.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (source.live(slow) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK_FALSE(source.live(slow));
  CHECK(cancelled.calls == 1);
  callbacks->shut_down();
}

TEST_CASE("shut_down completes pending callbacks with operation_canceled and refuses new waits", "[engine]") {
  host_completion_source source;
  auto callbacks = completion_callbacks::create();
  const auto t = source.create(), late = source.create();
  recorded pending, refused;
  auto fp = pending.result.get_future(), fr = refused.result.get_future();
  callbacks->wait({&source, 1, 0, t, nullptr, 0}, &pending);
  callbacks->shut_down();
  REQUIRE(fp.wait_for(1s) == std::future_status::ready);
  CHECK(fp.get().first == std::errc::operation_canceled);
  callbacks->wait({&source, 1, 0, late, nullptr, 0}, &refused);
  REQUIRE(fr.wait_for(1s) == std::future_status::ready);
  CHECK(fr.get().first == std::errc::operation_canceled);
  CHECK_FALSE(source.live(late));
  source.complete(t);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (source.live(t) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK_FALSE(source.live(t));  // the poller released it once done
}

TEST_CASE("10,000 callbacks from 4 threads over 64 queues: each called exactly once", "[engine]") {
  host_completion_source source;
  auto callbacks = completion_callbacks::create();
  constexpr int per_thread = 2500, threads = 4;
  struct counting final : completion_callback {
    std::atomic<int>* total;
    std::atomic<int> calls{0};
    void complete(std::error_code ec) noexcept override {
      if (!ec) ++*total;
      ++calls;
    }
  };
  std::atomic<int> total{0};
  std::vector<counting> cbs(per_thread * threads);
  for (auto& c : cbs) c.total = &total;
  std::vector<std::uintptr_t> tokens(cbs.size());
  for (auto& t : tokens) t = source.create();
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k)
    ts.emplace_back([&, k] {
      for (int i = k * per_thread; i < (k + 1) * per_thread; ++i) {
        callbacks->wait({&source, static_cast<std::uintptr_t>(i % 64), 0, tokens[i], nullptr, 0}, &cbs[i]);
        if (i % 3 == 0) source.complete(tokens[i]);
      }
    });
  for (auto& t : ts) t.join();
  for (std::size_t i = 0; i < tokens.size(); ++i) source.complete(tokens[i]);
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (total.load() < int(cbs.size()) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  CHECK(total.load() == int(cbs.size()));
  int twice = 0;
  for (auto& c : cbs) twice += c.calls != 1;
  CHECK(twice == 0);
  callbacks->shut_down();
}
