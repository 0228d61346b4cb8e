#pragma once
//! @file `stream_pool`: non-blocking streams of one context by priority (seed §4.4: priorities are hints), handed
//! out round-robin or borrowed exclusively.

#include <cuasync/driver/stream.hpp>

#include <atomic>
#include <mutex>
#include <vector>

namespace cuasync::runtime {

enum class priority { high, normal, low };

//! Streams by priority. Thread-safe. `next()` shares streams round-robin (work from several callers interleaves in
//! stream order); `borrow()` gives a stream to one user until the lease ends.
class stream_pool {
 public:
  //! Creates `per_priority` streams for each of high, normal and low priority. @throws cuda_error
  stream_pool(context_ref ctx, std::size_t per_priority, std::source_location where = std::source_location::current());
  stream_pool(const stream_pool&) = delete;
  stream_pool& operator=(const stream_pool&) = delete;

  //! The next stream of that priority, round-robin.
  stream_ref next(priority p = priority::normal) noexcept;

  //! Exclusive use of a stream until destroyed; the stream goes back to the pool then.
  class lease {
   public:
    lease(stream_pool* pool, stream s, int level) : pool_(pool), stream_(std::move(s)), level_(level) {}
    lease(lease&&) noexcept = default;
    lease& operator=(lease&&) noexcept = default;
    ~lease();
    stream_ref get() const noexcept { return stream_; }
    operator stream_ref() const noexcept { return stream_; }

   private:
    stream_pool* pool_;
    stream stream_;
    int level_;
  };
  //! A stream for exclusive use (created if none is idle). @throws cuda_error
  lease borrow(priority p = priority::normal, std::source_location where = std::source_location::current());

  context_ref context() const noexcept { return ctx_; }
  int priority_value(priority p) const noexcept { return values_[static_cast<int>(p)]; }

 private:
  context_ref ctx_;
  int values_[3];
  std::vector<stream> shared_[3];
  std::atomic<std::size_t> cursor_[3]{};
  std::mutex mutex_;
  std::vector<stream> idle_[3];
};

}  // namespace cuasync::runtime
