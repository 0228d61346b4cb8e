// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/async_io/async_pipeline.hpp>
#include <cuasync/async_io/async_wait.hpp>

#include <cuasync/driver/error.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <system_error>
#include <vector>

namespace cuasync {

namespace {
// Waits for slot `i`'s batch, then postprocesses it (unless the device failed) and frees the slot. Cancelled (a
// timeout, a `||`), the slot stays in flight: its batch may still be running, and the next retire awaits it again.
boost::asio::awaitable<void> retire(runtime::slot_pipeline& p, std::size_t i,
                                    const runtime::slot_pipeline::stage& post) {
  if (p.batch_in(i) == SIZE_MAX) co_return;
  try {
    const event_ref done = p.done_event(i);
    co_await async_wait(done, boost::asio::use_awaitable);
  } catch (const std::system_error& e) {
    if (e.code().category() == cu_category()) p.release_slot(i);  // the device failed: nothing to postprocess
    throw;
  }
  p.postprocess(i, post);
}
}  // namespace

boost::asio::awaitable<void> async_run(runtime::slot_pipeline& p, std::size_t batches,
                                       runtime::slot_pipeline::stage pre, runtime::slot_pipeline::stage gpu,
                                       runtime::slot_pipeline::stage post) {
  std::exception_ptr error;
  try {
    for (std::size_t b = 0; b < batches; ++b) {
      const std::size_t i = p.slot_index(b);
      co_await retire(p, i, post);  // the slot's previous batch: awaited, then postprocessed
      p.submit(b, pre, gpu);
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Drain in batch order, even after an error: batches already submitted complete and are postprocessed.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.slot_count(); ++i)
    if (p.batch_in(i) != SIZE_MAX) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p.batch_in(a) < p.batch_in(b); });
  for (std::size_t i : order) {
    try {
      co_await retire(p, i, post);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace cuasync
