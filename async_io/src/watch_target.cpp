// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The watchdog's targets and the service through which their execution context tells them it is going.
#include "watch_target.hpp"

#include <cuasync/trace/blocking_calls.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/thread_probe.hpp>

#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <vector>

namespace asio = boost::asio;

namespace cuasync::detail {
namespace {

// One per watched execution context: at its shutdown (the first step of its destruction, before its scheduler drops
// the queued handlers) every target of it lets its executor go.
class context_watch_service final : public asio::execution_context::service {
 public:
  using key_type = context_watch_service;
  static inline asio::execution_context::id id;

  explicit context_watch_service(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

  void add(const std::shared_ptr<watch_target>& t) {
    std::lock_guard lock(mutex_);
    std::erase_if(targets_, [](const std::weak_ptr<watch_target>& w) { return w.expired(); });
    targets_.push_back(t);
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<watch_target>> targets;
    {
      std::lock_guard lock(mutex_);
      targets.swap(targets_);
    }
    for (const auto& w : targets)
      if (auto t = w.lock()) t->forget_context();
  }

  std::mutex mutex_;
  std::vector<std::weak_ptr<watch_target>> targets_;
};

// Runs on the watched executor: three stores, never a wait (the thread registers with trace's probes once).
struct heartbeat {
  std::shared_ptr<heartbeat_times> times;
  void operator()() const noexcept {
    trace::register_this_thread();
    times->ran_on.store(trace::this_thread_ordinal(), std::memory_order_relaxed);
    times->ran_ns.store(trace::now_ns(), std::memory_order_relaxed);
    times->posted_ns.store(0, std::memory_order_release);
  }
};

}  // namespace

std::shared_ptr<watch_target> watch_target::of(const asio::any_io_executor& ex) {
  auto t = std::make_shared<watch_target>();
  // Untracked: a target held by the watchdog must not keep io_context::run() from returning.
  t->executor_ = asio::prefer(ex, asio::execution::outstanding_work.untracked);
  asio::execution_context& ctx = asio::query(ex, asio::execution::context);
  // An io_context (or a thread_pool) is asked whether it is stopped through its scheduler: Asio's detail, but the one
  // way to ask without knowing the executor's type (tracked or not, a strand, any_io_executor).
  if (asio::has_service<asio::detail::io_context_impl>(ctx))
    t->scheduler_ = &asio::use_service<asio::detail::io_context_impl>(ctx);
  asio::use_service<context_watch_service>(ctx).add(t);
  return t;
}

watch_target::status watch_target::beat(std::int64_t now_ns) noexcept {
  std::lock_guard lock(mutex_);
  if (!executor_) return status::gone;
  if (scheduler_ && scheduler_->stopped()) {
    // A heartbeat queued in a stopped context waits for a restart: its clock starts again from now, so a restart is
    // not taken for a stall.
    std::int64_t posted = times_->posted_ns.load(std::memory_order_acquire);
    if (posted != 0) times_->posted_ns.compare_exchange_strong(posted, now_ns, std::memory_order_acq_rel);
    return status::stopped;
  }
  if (times_->posted_ns.load(std::memory_order_acquire) != 0) return status::running;
  times_->posted_ns.store(now_ns, std::memory_order_release);  // before the post: the heartbeat may run at once
  try {
    asio::post(executor_, heartbeat{times_});
  } catch (...) {
    times_->posted_ns.store(0, std::memory_order_release);  // out of memory: try again next tick
  }
  return status::running;
}

void watch_target::forget_context() noexcept {
  asio::any_io_executor gone;
  std::lock_guard lock(mutex_);
  gone.swap(executor_);  // destroyed here, while the context's services are still alive (a strand's is)
  scheduler_ = nullptr;
}

}  // namespace cuasync::detail
