#pragma once
//! @file `completion_service`: the per-execution-context service behind every `async_wait`. It keeps one FIFO per
//! queue (a stream), and a poll pass queries only each FIFO's head and stops at the first pending one, so a pass
//! costs O(active queues), not O(pending operations). When the source vouches for a queue's completion order
//! (`wait_target::order`), a pass first queries the FIFO's newest entry: done, it completes the whole FIFO with that
//! one query. Pending, the pass gallops back from it (pending queries are cheap: ~0.1 µs for a CUDA event, against
//! ~1.3 µs for a finished one) to the first finished entry and completes everything up to it: one query of finished
//! work per FIFO and pass (the head is checked first while it was pending at the last pass, so a FIFO of long waits
//! costs two queries). Passes run on one poller thread per process, or on the I/O executor itself
//! (`poll_mode::in_executor`); see `poll_policy` for the adaptive waiting.
//!
//! Completion: the poller posts each pass's finished operations to their I/O executor, one post per executor, which
//! `dispatch`es the handler on the handler's associated executor (one post, no dispatch, when that is the I/O
//! executor); no user code runs on the poller thread and no handler runs inside the initiating function. Each pending
//! operation holds outstanding work on both executors, so `io_context::run()` does not return while GPU work is
//! awaited.
//!
//! `shutdown()` (when the execution context is destroyed) destroys pending handlers without calling them; the
//! tokens (events) and anything tied to the operations stay alive until the source says they are done, then they
//! are released by the process's poller thread.
//!
//! The Asio-heavy implementation lives in one .cpp: handlers cross this header type-erased.

#include <cuasync/async_io/completion_source.hpp>
#include <cuasync/async_io/poll_policy.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

namespace cuasync {

//! One wait, as the completion service sees it: what to query, and what to keep alive until it is done.
struct wait_target {
  completion_source* source = nullptr;  //!< must outlive the service's use of `token`
  std::uintptr_t queue = 0;  //!< FIFO key: waits of one queue become ready in order (a stream); only heads are polled
  std::uintptr_t group = 0;  //!< failure domain: a group-scoped failure fails all its queues (a context)
  std::uintptr_t token = 0;  //!< what `source` queries; released to it once done
  std::shared_ptr<void> keep_alive;  //!< held until the token is done, even after a cancellation
  //! 0: no promise. Otherwise the token's place in its queue's completion order: the source vouches that once a
  //! token is done, every token of the same queue with a smaller nonzero order is done too (events recorded on one
  //! CUstream, in recording order). FIFOs are kept sorted by it.
  std::uint64_t order = 0;
};

namespace detail {
class wait_queues;
//! The completion handler of every wait, type-erased.
using wait_handler = boost::asio::any_completion_handler<void(std::error_code)>;
//! What the initiation knows about the handler before its type is erased; the defaults assume nothing.
struct wait_hints {
  bool handler_on_io = false;      //!< its associated executor is the I/O executor (one work guard, no re-dispatch)
  bool default_allocator = false;  //!< it has no allocator of its own (the state is recycled per thread)
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

  //! Changes how this service polls; takes effect at the next pass. The initial policy is `balanced()`, or the one
  //! named by `$CUASYNC_POLL_POLICY` (`latency`, `balanced`, `efficient`).
  void set_policy(const poll_policy& policy);
  poll_policy policy() const;

  //! Counters, for tests and diagnostics.
  struct statistics {
    std::uint64_t passes = 0;      //!< poll passes run (head-only passes and watchdog passes)
    std::uint64_t queries = 0;     //!< source queries made by passes
    std::uint64_t completed = 0;   //!< operations completed successfully
    std::uint64_t failed = 0;      //!< operations completed with a source error
    std::uint64_t aborted = 0;     //!< operations completed with operation_aborted
    std::uint64_t executor_passes = 0;  //!< passes run by the I/O executor (in_executor mode, executor window)
    std::uint64_t handoffs = 0;    //!< times the I/O executor handed pending waits to the poller thread
    std::uint64_t offloads = 0;    //!< hand-overs because polling took too large a share of a busy io thread
    std::uint64_t batches = 0;     //!< posts carrying completions from a pass off the io executor (one per executor)
    std::size_t pending_operations = 0;  //!< waits whose handler has not been handed over yet
    std::size_t pending_tokens = 0;      //!< tokens not yet done (includes cancelled operations' tokens)
    std::size_t active_queues = 0;       //!< FIFOs with pending tokens
  };
  statistics stats() const;

  //! Starts a wait. Used by `async_wait`; the handler completes exactly once: with an empty code when the token is
  //! done, the source's error if it failed, or `operation_aborted` (`std::errc::operation_canceled`) when cancelled
  //! through the handler's cancellation slot (total, partial and terminal are all supported). Never runs the handler
  //! inside this call. @throws std::bad_alloc
  void start_wait(boost::asio::any_io_executor io_executor, wait_target target, detail::wait_handler handler,
                  detail::wait_hints hints = {});
  //! Completes `handler` with `error` (posted, never inline): for waits that failed before they could start (e.g. the
  //! event could not be recorded).
  void fail_wait(boost::asio::any_io_executor io_executor, std::error_code error, detail::wait_handler handler);

  //! Runs one head-only pass on the calling thread and hands completions over as the poller would; returns the
  //! number of operations it completed. For hosts that drive polling themselves and for tests.
  std::size_t poll_once();

 private:
  void shutdown() override;
  std::shared_ptr<detail::wait_queues> queues_;
};

}  // namespace cuasync
