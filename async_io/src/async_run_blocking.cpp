// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/async_io/async_run_blocking.hpp>

#include <algorithm>
#include <thread>

namespace cuasync {

boost::asio::thread_pool& blocking_pool() {
  // Never destroyed: work may still be queued during static destruction.
  static auto* pool = new boost::asio::thread_pool(std::max(2u, std::thread::hardware_concurrency() / 2));
  return *pool;
}

}  // namespace cuasync
