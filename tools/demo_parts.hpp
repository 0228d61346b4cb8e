// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// One CPU stage split into parts that run at once on a thread pool, the calling thread (a pool thread itself)
// taking parts too: it never waits for a part still queued behind other work, only for parts that other threads are
// running, so a busy pool cannot deadlock it, and a part that finds nothing left costs one atomic increment.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>

namespace cuasync::tools::demo {

//! Calls `part(i)` for every i in [0, parts), on this thread and on `pool`, and returns when all have returned.
//! @throws the first exception a part threw (the others still run)
template <class F>
void run_parts(boost::asio::thread_pool& pool, std::size_t parts, const F& part) {
  if (parts <= 1) {
    part(std::size_t{0});
    return;
  }
  struct shared {
    std::atomic<std::size_t> next{0}, done{0};
    std::size_t parts = 0;
    std::mutex mutex;
    std::exception_ptr error;
  };
  auto st = std::make_shared<shared>();
  st->parts = parts;
  // `part` is only called while parts are left, that is before this function returns.
  auto take_parts = [st, &part] {
    for (std::size_t i; (i = st->next.fetch_add(1, std::memory_order_relaxed)) < st->parts;) {
      try {
        part(i);
      } catch (...) {
        std::lock_guard lock(st->mutex);
        if (!st->error) st->error = std::current_exception();
      }
      if (st->done.fetch_add(1, std::memory_order_acq_rel) + 1 == st->parts) st->done.notify_all();
    }
  };
  for (std::size_t i = 1; i < parts; ++i) boost::asio::post(pool, take_parts);
  take_parts();
  for (std::size_t d = st->done.load(std::memory_order_acquire); d < parts;
       d = st->done.load(std::memory_order_acquire))
    st->done.wait(d, std::memory_order_acquire);
  if (st->error) std::rethrow_exception(st->error);
}

}  // namespace cuasync::tools::demo
