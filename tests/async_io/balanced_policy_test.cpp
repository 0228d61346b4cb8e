// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The balanced policy on a host completion source (no CUDA): the io executor polls during its window after
// activity, then hands pending waits to the poller thread, and takes them back when new waits start.
#include <cuasync/async_io/completion_service.hpp>

#include "host_support.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
using cuasync::test::eventually;
using cuasync::test::host_setup;

namespace {
// A host source that remembers which thread made each query.
class thread_recording_source final : public completion_source {
 public:
  host_completion_source inner;
  poll_result query(std::uintptr_t token) noexcept override {
    {
      std::lock_guard lock(mutex);
      ++by_thread[std::this_thread::get_id()];
    }
    return inner.query(token);
  }
  void release(std::uintptr_t token) noexcept override { inner.release(token); }
  std::size_t queries_from(std::thread::id id) {
    std::lock_guard lock(mutex);
    return by_thread[id];
  }
  std::size_t queries_not_from(std::thread::id id) {
    std::lock_guard lock(mutex);
    std::size_t n = 0;
    for (auto& [t, c] : by_thread)
      if (t != id) n += c;
    return n;
  }
  std::mutex mutex;
  std::map<std::thread::id, std::size_t> by_thread;
};

// One wait on `src`'s token `t`, with io.run() on a thread of its own: what the handler saw, and on which thread.
struct one_wait {
  std::error_code result{1, std::generic_category()};
  std::thread::id io_thread, handler_thread;
  std::thread runner;
  one_wait(asio::io_context& io, thread_recording_source& src, std::uintptr_t t) {
    async_wait(io.get_executor(), wait_target{&src, 1, 0, t, nullptr}, [this](std::error_code ec) {
      result = ec;
      handler_thread = std::this_thread::get_id();
    });
    std::promise<std::thread::id> started;
    runner = std::thread([&] {
      started.set_value(std::this_thread::get_id());
      io.run();
    });
    io_thread = started.get_future().get();
  }
};
}  // namespace

TEST_CASE("balanced: the io executor polls during its window, then hands the wait to the poller thread",
          "[async_io]") {
  thread_recording_source src;
  asio::io_context io;
  completion_service& svc = asio::use_service<completion_service>(io);
  poll_policy p = poll_policy::balanced();
  p.executor_window = 30ms;  // long enough to observe on a loaded machine
  svc.set_policy(p);
  const auto t = src.inner.create();
  const auto t0 = std::chrono::steady_clock::now();
  one_wait w(io, src, t);
  const std::thread::id io_thread = w.io_thread;
  REQUIRE(eventually([&] { return svc.stats().handoffs == 1; }));
  const auto handed_over_after = std::chrono::steady_clock::now() - t0;
  CHECK(handed_over_after >= 30ms);
  CHECK(src.queries_from(io_thread) > 0);  // the window's passes ran on the io thread
  CHECK(svc.stats().executor_passes > 0);
  // From now on the poller thread queries, the io thread no longer.
  REQUIRE(eventually([&] { return src.queries_not_from(io_thread) >= 3; }));
  const std::size_t io_queries = src.queries_from(io_thread);
  std::this_thread::sleep_for(30ms);
  CHECK(src.queries_from(io_thread) == io_queries);
  CHECK(src.queries_not_from(io_thread) >= 3);
  src.inner.complete(t);
  w.runner.join();
  CHECK_FALSE(w.result);
  CHECK(w.handler_thread == io_thread);
  CHECK(svc.stats().handoffs == 1);
}

TEST_CASE("balanced: a wait started after the hand-over is polled by the io executor again", "[async_io]") {
  host_setup h;
  poll_policy p = poll_policy::balanced();
  p.executor_window = 5ms;
  h.service.set_policy(p);
  const auto first = h.source.create(), second = h.source.create();
  auto guard = asio::make_work_guard(h.io);
  std::thread runner([&] { h.io.run(); });
  async_wait(h.io.get_executor(), h.target(1, first), [](std::error_code) {});
  REQUIRE(eventually([&] { return h.service.stats().handoffs == 1; }));
  const auto executor_passes = h.service.stats().executor_passes;
  std::atomic<bool> done{false};
  asio::post(h.io, [&] {
    async_wait(h.io.get_executor(), h.target(2, second), [&](std::error_code ec) { done = !ec; });
  });
  CHECK(eventually([&] { return h.service.stats().executor_passes > executor_passes + 10; }));
  h.source.complete(second);
  CHECK(eventually([&] { return done.load(); }));
  h.source.complete(first);
  CHECK(eventually([&] { return h.service.stats().pending_operations == 0; }));
  guard.reset();
  runner.join();
  CHECK(h.service.stats().handoffs >= 1);
}

TEST_CASE("balanced: after its window the io executor backs off on its own timer until executor_backoff",
          "[async_io]") {
  thread_recording_source src;
  asio::io_context io;
  completion_service& svc = asio::use_service<completion_service>(io);
  poll_policy p = poll_policy::balanced();
  p.executor_window = 1ms;
  p.executor_backoff = 60s;  // never reached here: the executor keeps the wait
  p.min_sleep = 1ms;         // few passes, whatever the machine's load
  svc.set_policy(p);
  const auto t = src.inner.create();
  one_wait w(io, src, t);
  const std::thread::id io_thread = w.io_thread;
  // Past the window the executor still polls (on its timer), and nothing is handed over.
  REQUIRE(eventually([&] { return src.queries_from(io_thread) > 0; }));
  const std::size_t early = src.queries_from(io_thread);
  std::this_thread::sleep_for(20ms);
  CHECK(eventually([&] { return src.queries_from(io_thread) > early; }));
  CHECK(svc.stats().handoffs == 0);
  src.inner.complete(t);
  w.runner.join();
  CHECK_FALSE(w.result);
  CHECK(w.handler_thread == io_thread);
  CHECK(svc.stats().handoffs == 0);
}
