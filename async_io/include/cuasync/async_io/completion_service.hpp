// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `completion_service`: the Asio front-end of the completion engine, one per execution context. Every
//! `async_wait`, `async_launch` and `async_copy` starts here: the service attaches the operation to the engine's
//! FIFOs (engine/completion_queues.hpp: one per stream, searched with one query of finished work per stream and
//! pass), decides who polls, and hands completions to the operations' executors.
//!
//! Who polls (`poll_policy`): the I/O executor itself for a short window after activity (the latency floor), then the
//! process's poller thread with backoff (little CPU for long waits); or the executor only (`latency`), or the thread
//! only (`efficient`).
//!
//! Completion: finished operations reach their I/O executor through one FIFO per executor (a pass's completions never
//! overtake an earlier pass's) and run back to back for at most 1 ms before the executor's other handlers get a turn
//! (inline in an executor pass, else from a drain handler); each is `dispatch`ed on the handler's associated executor.
//! No user code runs on the poller thread and no handler runs inside the initiating function. Each pending operation
//! holds outstanding work on both executors, so `io_context::run()` does not return while GPU work is awaited.
//!
//! Admission (engine/admission.hpp): an operation that enqueues GPU work takes a place first; with no room it waits
//! asynchronously and its work is enqueued once an earlier operation completes, so no enqueue blocks the io thread.
//!
//! `shutdown()` (when the execution context is destroyed) destroys pending handlers without calling them (operations
//! still waiting for admission are never enqueued); the tokens (events) and anything tied to the operations stay
//! alive until the GPU is done with them, then the process's poller thread releases them.
//!
//! Asio's heavy templates live in async_io's sources: handlers cross this header type-erased.

#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/poll_policy.hpp>

#include <cuasync/driver/stream.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <system_error>

namespace cuasync {

namespace detail {
class service_queues;
//! The completion handler of every operation, type-erased.
using wait_handler = boost::asio::any_completion_handler<void(std::error_code)>;
//! What the initiation knows about the handler before its type is erased; the defaults assume nothing.
struct wait_hints {
  bool handler_on_io = false;      //!< its associated executor is the I/O executor (one work guard, no re-dispatch)
  bool default_allocator = false;  //!< it has no allocator of its own (the state is recycled per thread)
  std::source_location where{};    //!< the awaiting caller's line, when known (the trace's name, the error's line)
  std::uint64_t work_key = 0;      //!< what the work is (wait_target::work_key); 0: unknown, not predicted
};
//! The work an operation enqueues on its stream (a launch, a copy), not owned: called at once when the operation is
//! admitted at once, or copied into a `std::function` when it has to wait for admission. Throws `cuda_error`.
struct enqueue_ref {
  const void* work;
  void (*call)(const void* work, stream_ref s);
  std::function<void(stream_ref)> (*store)(const void* work);

  template <class F>
  static enqueue_ref of(const F& f) noexcept {
    return {&f, [](const void* w, stream_ref s) { (*static_cast<const F*>(w))(s); },
            [](const void* w) { return std::function<void(stream_ref)>(*static_cast<const F*>(w)); }};
  }
};
//! How a task (work that reports its own completion, such as a staged copy) reports it: exactly once, from any thread.
class task_done {
 public:
  //! `detail`: the failure's full description (a `cuda_error` naming the failed call) when there is one.
  virtual void finish(std::error_code ec, std::exception_ptr detail) noexcept = 0;

 protected:
  ~task_done() = default;
};
//! A task, not owned (as `enqueue_ref`). `start(work, s, ticket, done)` starts it on `s` with its admission place
//! (holding the stream until it calls `ticket.end_hold()`, giving the place back when it drops the ticket) and
//! arranges for `done->finish` to be called once; it throws `cuda_error` when it cannot start (then `done` is not
//! called).
struct task_ref {
  using start_fn = void(stream_ref, admission_ticket, std::shared_ptr<task_done>);
  const void* work;
  void (*start)(const void* work, stream_ref s, admission_ticket ticket, std::shared_ptr<task_done> done);
  std::function<start_fn> (*store)(const void* work);

  template <class F>
  static task_ref of(const F& f) noexcept {
    return {&f,
            [](const void* w, stream_ref s, admission_ticket t, std::shared_ptr<task_done> d) {
              (*static_cast<const F*>(w))(s, std::move(t), std::move(d));
            },
            [](const void* w) { return std::function<start_fn>(*static_cast<const F*>(w)); }};
  }
};
}  // namespace detail

//! The completion service of one execution context. Obtain it with
//! `boost::asio::use_service<cuasync::completion_service>(ctx)`. Thread-safe.
class completion_service : public boost::asio::execution_context::service {
 public:
  using key_type = completion_service;
  static inline boost::asio::execution_context::id id;

  explicit completion_service(boost::asio::execution_context& ctx);
  ~completion_service() override;

  //! `use_service<completion_service>(ctx)` without its registry lock when this thread asked for `ctx` last: every
  //! operation's initiation looks its service up (a lock and a search per awaited operation).
  static completion_service& of(boost::asio::execution_context& ctx);

  //! Changes how this service polls; takes effect at the next pass. The initial policy is `balanced()`, or the one
  //! named by `$CUASYNC_POLL_POLICY` (`latency`, `balanced`, `efficient`).
  void set_policy(const poll_policy& policy);
  poll_policy policy() const;

  //! Counters, for tests and diagnostics.
  using statistics = completion_statistics;
  statistics stats() const;

  //! Starts a wait on a recorded token. Used by `async_wait`; the handler completes exactly once: with an empty code
  //! when the token is done, the source's error if it failed, or `operation_aborted` (`std::errc::operation_canceled`)
  //! when cancelled through the handler's cancellation slot (total, partial and terminal are all supported). Never
  //! runs the handler inside this call. @throws std::bad_alloc (the token is then released)
  void start_wait(boost::asio::any_io_executor io_executor, wait_target target, detail::wait_handler handler,
                  detail::wait_hints hints = {});
  //! Starts an operation that enqueues `enqueue`'s work on `s` once admitted (at once when there is room), records a
  //! pooled event after it and waits for it; `keep_alive` is held until the GPU work is done. A failure to enqueue
  //! completes the handler with its code, as does a stream that cannot be asked for a place (destroyed, or its
  //! context gone). Cancelled while waiting for admission, the work is never enqueued. @throws std::bad_alloc
  void start_operation(boost::asio::any_io_executor io_executor, stream_ref s, const detail::enqueue_ref& enqueue,
                       std::shared_ptr<void> keep_alive, detail::wait_handler handler, detail::wait_hints hints,
                       std::source_location where);
  //! Starts a task on `s` once admitted, holding the stream (later operations on it wait) until the task lets go;
  //! the handler completes when the task says it is done. Cancelled before admission, the task never starts; after,
  //! it runs on (its memory must stay valid: `keep_alive` is held until it is done) and the handler completes at once.
  //! A stream that cannot be asked for a place completes the handler with that error. @throws std::bad_alloc
  void start_task(boost::asio::any_io_executor io_executor, stream_ref s, const detail::task_ref& task,
                  std::shared_ptr<void> keep_alive, detail::wait_handler handler, detail::wait_hints hints);
  //! Completes `handler` with `error` (posted, never inline): for waits that failed before they could start (e.g. the
  //! event could not be recorded). `described`: the failed call's own error (what use_awaitable throws and
  //! failure_detail() gives), `s` and `where`: the stream and the caller's line, for a message without one.
  void fail_wait(boost::asio::any_io_executor io_executor, std::error_code error, detail::wait_handler handler,
                 std::exception_ptr described = nullptr, stream_ref s = {}, std::source_location where = {});

  //! Runs one head pass on the calling thread and hands completions over as the poller would; returns the number of
  //! operations it completed. For hosts that drive polling themselves and for tests.
  std::size_t poll_once();

 private:
  void shutdown() override;
  // CUASYNC_WATCHDOG_MS set: the first operation's executor is watched by the process-wide io_watchdog.
  void watch_once(const boost::asio::any_io_executor& io_executor);
  std::shared_ptr<detail::service_queues> queues_;
  const bool watchdog_asked_;
  std::atomic<bool> watching_{false};
};

}  // namespace cuasync
