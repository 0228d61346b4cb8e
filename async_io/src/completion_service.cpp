// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The completion service: the Asio execution-context service that owns one service_queues.
#include <cuasync/async_io/completion_service.hpp>

#include <cuasync/async_io/io_watchdog.hpp>

#include "service_queues.hpp"

#include <atomic>
#include <cstdint>

namespace cuasync {

namespace {
// Bumped by every service's destruction: a thread's cached (context, service) pair is used only while no service has
// been destroyed since it was filled, so a context destroyed and another created at its address is never matched to
// the first one's service. Destroying a context while this thread initiates on it is misuse already.
std::atomic<std::uint64_t> services_destroyed{0};
struct last_service {
  boost::asio::execution_context* ctx = nullptr;
  completion_service* service = nullptr;
  std::uint64_t destroyed = 0;
};
thread_local last_service last;
}  // namespace

completion_service& completion_service::of(boost::asio::execution_context& ctx) {
  const std::uint64_t destroyed = services_destroyed.load(std::memory_order_acquire);
  if (last.ctx == &ctx && last.destroyed == destroyed) return *last.service;
  auto& service = boost::asio::use_service<completion_service>(ctx);
  last = {&ctx, &service, destroyed};
  return service;
}

completion_service::completion_service(boost::asio::execution_context& ctx)
    : boost::asio::execution_context::service(ctx),
      queues_(std::make_shared<detail::service_queues>()),
      watchdog_asked_(io_watchdog::environment_threshold().count() != 0) {}

void completion_service::watch_once(const boost::asio::any_io_executor& io_executor) {
  if (!watchdog_asked_ || watching_.exchange(true, std::memory_order_relaxed)) return;
  io_watchdog::watch_if_asked(io_executor);
}

completion_service::~completion_service() { services_destroyed.fetch_add(1, std::memory_order_acq_rel); }

void completion_service::shutdown() { queues_->shutdown(); }

void completion_service::set_policy(const poll_policy& policy) { queues_->set_policy(policy); }
poll_policy completion_service::policy() const { return queues_->policy(); }
completion_service::statistics completion_service::stats() const { return queues_->stats(); }

void completion_service::start_wait(boost::asio::any_io_executor io_executor, wait_target target,
                                    detail::wait_handler handler, detail::wait_hints hints) {
  watch_once(io_executor);
  queues_->start(std::move(io_executor), std::move(target), std::move(handler), hints);
}

void completion_service::start_operation(boost::asio::any_io_executor io_executor, stream_ref s,
                                         const detail::enqueue_ref& enqueue, std::shared_ptr<void> keep_alive,
                                         detail::wait_handler handler, detail::wait_hints hints,
                                         std::source_location where) {
  watch_once(io_executor);
  queues_->start_operation(std::move(io_executor), s, enqueue, std::move(keep_alive), std::move(handler), hints,
                           where);
}

void completion_service::start_task(boost::asio::any_io_executor io_executor, stream_ref s,
                                    const detail::task_ref& task, std::shared_ptr<void> keep_alive,
                                    detail::wait_handler handler, detail::wait_hints hints) {
  watch_once(io_executor);
  queues_->start_task(std::move(io_executor), s, task, std::move(keep_alive), std::move(handler), hints);
}

void completion_service::fail_wait(boost::asio::any_io_executor io_executor, std::error_code error,
                                   detail::wait_handler handler, std::exception_ptr described, stream_ref s,
                                   std::source_location where) {
  watch_once(io_executor);
  queues_->fail(std::move(io_executor), error, std::move(handler), std::move(described), s, where);
}

std::size_t completion_service::poll_once() { return queues_->pass(false, false); }

}  // namespace cuasync
