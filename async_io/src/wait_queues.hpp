#pragma once
// Internal: the state behind one completion_service (per-queue FIFOs, passes, hand-over) and the process's poller
// thread. Only completion_service.cpp includes this.
#include <cuasync/async_io/completion_service.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cuasync::detail {

using steady = std::chrono::steady_clock;
class wait_queues;

struct fifo;
struct wait_op;

// A token in a FIFO. Owned by the FIFO until the source says it is done; `op` is null once the operation was handed
// over (completed or cancelled).
struct wait_entry {
  completion_source* source = nullptr;
  std::uintptr_t token = 0;
  std::uintptr_t group = 0;
  std::uint64_t order = 0;  // wait_target::order
  std::shared_ptr<void> keep_alive;
  wait_op* op = nullptr;
};

struct fifo {
  completion_source* source = nullptr;
  std::uintptr_t key = 0;
  std::uintptr_t group = 0;
  std::deque<wait_entry*> entries;
  bool listed = false;
  // Every entry has a nonzero order and they are sorted: the newest being done means all are. Reset when empty.
  bool ordered = true;
  // The head was pending when last probed (and initially): the next search checks it first, so that a FIFO of long
  // waits costs two queries a pass however many are pending. Otherwise the search gallops back from the newest.
  bool head_pending = true;
};

// One operation: its handler and work guards. Allocated with the handler's associated allocator (or, for handlers
// without one, from a per-thread cache), freed before the handler runs.
struct wait_op {
  wait_handler handler;
  boost::asio::any_io_executor io_work;                   // outstanding_work.tracked
  boost::asio::any_completion_executor handler_work;      // outstanding_work.tracked; empty: the handler runs on io
  boost::asio::cancellation_slot slot;
  wait_queues* owner = nullptr;
  wait_entry* entry = nullptr;  // under owner->mutex_; null once handed over
  bool cached = false;          // memory from the per-thread cache
  bool on_poll_executor = false;  // io executor == the service's poll executor: an executor pass may call it inline
};

struct finished {
  wait_op* op;
  std::error_code error;
  std::uintptr_t group = 0;
};

class wait_queues : public std::enable_shared_from_this<wait_queues> {
 public:
  wait_queues();
  ~wait_queues();

  void start(boost::asio::any_io_executor io_ex, wait_target t, wait_handler h, wait_hints hints);
  void fail(boost::asio::any_io_executor io_ex, std::error_code ec, wait_handler h);
  void cancel(wait_op* op);
  void shutdown();

  void set_policy(const poll_policy& p);
  poll_policy policy() const;
  completion_service::statistics stats() const;

  // One pass (head-only, or every entry when `full`), handing completions over: by post to the I/O executor
  // (`from_io_thread` false) or by dispatch to the handler's executor (on the poll executor). Returns the count.
  std::size_t pass(bool full, bool from_io_thread);
  // For the poller thread: a pass (a full one when the watchdog is due), then the delay it wants before the next;
  // nullopt when nothing is pending.
  std::optional<std::chrono::nanoseconds> poller_pass();
  bool polled_by_thread() const;  // thread mode, or orphaned after shutdown
  bool empty() const;
  bool drained_orphan() const;  // shut down and nothing left to poll

 private:
  static wait_op* make_op(boost::asio::any_io_executor io_ex, wait_handler h, wait_hints hints);
  void executor_poll();
  void head_pass(std::uint64_t& queries, std::vector<finished>& done, std::vector<wait_entry*>& released);
  void full_pass(std::uint64_t& queries, std::vector<finished>& done, std::vector<wait_entry*>& released);
  // Takes `e` out of `f` (done with `r`) and fails its group when the failure reaches that far.
  void finish_locked(fifo& f, wait_entry* e, const poll_result& r, std::vector<finished>& done,
                     std::vector<wait_entry*>& released);
  void hand_to_thread();
  bool watchdog_due();  // true (and restarts the interval) when a full pass is due
  std::chrono::nanoseconds next_delay_locked() const;
  void schedule_executor_poll_locked(const boost::asio::any_io_executor& ex);
  void fail_group_locked(std::uintptr_t group, std::error_code ec, std::vector<finished>& done,
                         std::vector<wait_entry*>& released);
  void take_locked(wait_entry* e, std::error_code ec, std::vector<finished>& done);
  // Takes the entries of `f` up to `last` (a done token's order) from the front, with `r`'s outcome. Returns true when
  // that was a group failure.
  bool finish_run_locked(fifo& f, std::uint64_t last, const poll_result& r, std::vector<finished>& done,
                         std::vector<wait_entry*>& released);
  // An ordered FIFO whose entry `bound` (an order) is pending: finds its done prefix by probing backwards from
  // `bound` with doubling distance, then bisecting, so a run costs O(log n) queries, and a done token is queried
  // once. Returns false when the FIFO is no longer ordered (the caller polls it from the head).
  bool search_ordered(fifo& f, std::uint64_t bound, std::uint64_t& queries, std::vector<finished>& done,
                      std::vector<wait_entry*>& released, bool& group_failed);
  // Hands completions over from a pass off the io executor: one post per I/O executor.
  std::size_t post_batches(std::vector<finished>& done);
  // The executor's polling budget: true when it should hand its passes to the poller thread now.
  bool over_share(long long pass_start_ns);
  bool offloaded_locked() const {
    return offload_until_ns_ != 0 && now_ns() < offload_until_ns_;
  }
  static long long now_ns() noexcept { return steady::now().time_since_epoch().count(); }
  void note_activity() noexcept {
    last_activity_ns_.store(steady::now().time_since_epoch().count(), std::memory_order_relaxed);
  }
  bool executor_window_locked() const {
    return policy_.mode == poll_mode::poller_thread && policy_.executor_window.count() > 0;
  }

  mutable std::mutex mutex_;
  std::mutex pass_mutex_;  // one pass at a time
  struct key_hash {
    std::size_t operator()(const std::pair<completion_source*, std::uintptr_t>& k) const noexcept {
      return std::hash<std::uintptr_t>()(k.second) ^ (std::hash<const void*>()(k.first) << 1);
    }
  };
  std::unordered_map<std::pair<completion_source*, std::uintptr_t>, fifo, key_hash> queues_;
  std::vector<fifo*> active_;
  struct head {
    fifo* f;
    wait_entry* oldest;
    wait_entry* newest;  // null unless the FIFO is ordered and holds more than one entry
  };
  std::vector<head> scratch_;    // head-pass snapshot (under pass_mutex_)
  std::vector<fifo*> scratch_full_;  // full-pass snapshot (under pass_mutex_)
  // Groups that failed in the current pass, with their error (under pass_mutex_).
  std::vector<std::pair<std::uintptr_t, std::error_code>> failed_groups_;
  poll_policy policy_;
  std::atomic<long long> last_activity_ns_{0};
  steady::time_point last_watchdog_ = steady::now();
  completion_service::statistics stats_;
  bool shut_down_ = false;
  std::atomic<bool> registered_{false};
  // in-executor mode
  bool task_scheduled_ = false;
  std::atomic<long long> last_executor_pass_ns_{0};  // a task that runs no pass for a window is starving
  // The executor's polling share, measured over its recent passes (touched by the poll task only, and reset under
  // mutex_ when a new task is scheduled): time polling (passes less the handlers they ran inline), time in other
  // work (those handlers, and everything between passes), passes counted.
  long long share_prev_end_ns_ = 0, share_poll_ns_ = 0, share_other_ns_ = 0, share_handler_ns_ = 0;
  long long share_cycles_ = 0;
  long long offload_until_ns_ = 0;  // under mutex_: until then the poller thread polls (executor over its share)
  std::optional<boost::asio::any_io_executor> poll_executor_;
  std::optional<boost::asio::steady_timer> timer_;

  friend struct op_access;
};

// The process's one poller thread: started when a thread-mode service first waits, stopped (joined) when the last
// service shuts down; blocks on a condition variable when nothing is pending.
class poller {
 public:
  static poller& instance();
  void add(std::shared_ptr<wait_queues> q);
  void remove(const wait_queues* q, bool keep_as_orphan);
  void adopt_orphan(std::shared_ptr<wait_queues> q);
  // Called after every new wait: wakes the thread if it sleeps or blocks.
  void submitted() noexcept {
    submissions_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
  }
  std::uint64_t wakeups() const noexcept { return wakeups_.load(std::memory_order_relaxed); }

 private:
  poller() = default;
  void wake();
  void run(std::uint64_t generation);
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<wait_queues>> list_;
  std::thread thread_;
  bool running_ = false;
  bool wake_flag_ = false;
  std::uint64_t generation_ = 0, stopped_generation_ = 0;
  std::atomic<bool> sleeping_{false};
  std::atomic<std::uint64_t> submissions_{0};
  std::atomic<std::uint64_t> wakeups_{0};
};

}  // namespace cuasync::detail
