// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `async_run`: the slot pipeline (runtime/slot_pipeline.hpp) driven from a coroutine. The same
//! stages as `slot_pipeline::run`, but the thread that drives it never waits for the GPU: a slot's previous batch is
//! awaited (its done event, through the completion engine), then postprocessed, then the slot is refilled. `pre` and
//! `post` run on the coroutine's executor (the io thread), between other handlers; GPU stages overlap across slots.
//!
//! Errors: an exception from a stage, or a device error, stops submitting; the batches already submitted are awaited
//! and (unless the device failed) postprocessed, in batch order; then the first error is rethrown from `co_await`.
//! Cancelled (a timeout through `||`, a cancellation slot), it stops at once and the slots whose batches may still
//! run stay in flight: the next `async_run` on the pipeline awaits (and postprocesses) them before refilling them.
//! The pipeline must outlive the call; create and destroy it outside coroutines (its buffers are allocated and freed
//! with blocking driver calls).

#include <cuasync/runtime/slot_pipeline.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstddef>

namespace cuasync {

//! Runs `batches` batches through `p`. @throws as `slot_pipeline::run`, from `co_await`
boost::asio::awaitable<void> async_run(runtime::slot_pipeline& p, std::size_t batches,
                                       runtime::slot_pipeline::stage pre, runtime::slot_pipeline::stage gpu,
                                       runtime::slot_pipeline::stage post);

}  // namespace cuasync
