// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `stream_pool`: non-blocking streams of one context by priority (priorities are hints, not preemption), handed
//! out round-robin or borrowed exclusively.

#include <cuasync/driver/stream.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace cuasync::runtime {

enum class priority { high, normal, low };

//! Streams by priority. Thread-safe. `next()` shares streams round-robin (work from several callers interleaves in
//! stream order); `borrow()` gives a stream to one user until the lease ends. A lease may outlive the pool (and the
//! runtime that made it): it keeps the idle list it goes back to, and `context_keeper` (the context's owner, e.g.
//! the runtime's primary-context retain), so its stream is destroyed while its context still exists.
class stream_pool {
  struct idle_streams;

 public:
  //! Creates `per_priority` streams for each of high, normal and low priority. @throws cuda_error
  stream_pool(context_ref ctx, std::size_t per_priority, std::source_location where = std::source_location::current(),
              std::shared_ptr<const void> context_keeper = nullptr);
  stream_pool(const stream_pool&) = delete;
  stream_pool& operator=(const stream_pool&) = delete;

  //! The next stream of that priority, round-robin.
  stream_ref next(priority p = priority::normal) noexcept;

  //! Exclusive use of a stream until destroyed; the stream goes back to the pool then.
  class lease {
   public:
    lease(lease&&) noexcept = default;
    lease& operator=(lease&&) noexcept;
    ~lease();
    stream_ref get() const noexcept { return stream_; }
    operator stream_ref() const noexcept { return stream_; }

   private:
    friend class stream_pool;
    lease(std::shared_ptr<idle_streams> idle, stream s, int level)
        : idle_(std::move(idle)), stream_(std::move(s)), level_(level) {}
    void give_back() noexcept;
    std::shared_ptr<idle_streams> idle_;  // declared first: destroyed after the stream
    stream stream_;
    int level_ = 0;
  };
  //! A stream for exclusive use (created if none is idle). @throws cuda_error
  lease borrow(priority p = priority::normal, std::source_location where = std::source_location::current());

  context_ref context() const noexcept { return ctx_; }
  int priority_value(priority p) const noexcept { return values_[static_cast<int>(p)]; }

 private:
  // What leases go back to. Its keeper is declared first: released after the streams are destroyed.
  struct idle_streams {
    std::shared_ptr<const void> context_keeper;
    std::mutex mutex;
    std::vector<stream> by_level[3];
  };

  context_ref ctx_;
  int values_[3];
  std::shared_ptr<idle_streams> idle_;  // before shared_: destroyed after them (it may hold the context)
  std::vector<stream> shared_[3];
  std::atomic<std::size_t> cursor_[3]{};
};

}  // namespace cuasync::runtime
