// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The slot pipeline (copies overlapped with compute, as in the inference pipeline): N slots, each with pinned host
//! buffers, device buffers, its own stream and a done event. Batch b goes to slot b % N: preprocess (host) → H2D → GPU
//! stage → D2H → postprocess (host). Slots overlap each other's copies and kernels, so the steady-state time per batch
//! approaches the slowest stage. A slot is refilled only after its done event has completed and its postprocess has
//! finished, so no copy ever reads a host buffer that is being overwritten.

#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <source_location>
#include <span>
#include <thread>
#include <vector>

namespace cuasync::runtime {

struct slot_pipeline_options {
  std::size_t slots = 3;
  std::size_t input_bytes = 0;   //!< per slot (host and device)
  std::size_t output_bytes = 0;  //!< per slot (host and device)
  unsigned post_threads = 0;     //!< 0: postprocess on the calling thread; else on this many worker threads
};

//! One slot. `pre` fills `input` (or points `input_view` at other pinned memory); `gpu` enqueues work on `stream`
//! reading `input_device` and writing `output_device`; `post` reads `output` (or `output_view`).
struct pipeline_slot {
  std::size_t index = 0;
  pinned_block input, output;
  device_buffer input_device, output_device;
  stream_ref stream;
  //! What the H2D copy reads (default: all of `input`); `pre` may shorten it or point it at other pinned memory.
  std::span<const std::byte> input_view;
  //! Where the D2H copy writes (default: all of `output`).
  std::span<std::byte> output_view;
};

class slot_pipeline {
 public:
  //! Allocates every slot's buffers and borrows a stream per slot from `rt`. @throws cuda_error
  slot_pipeline(device_runtime& rt, slot_pipeline_options options,
                std::source_location where = std::source_location::current());
  ~slot_pipeline();
  slot_pipeline(const slot_pipeline&) = delete;
  slot_pipeline& operator=(const slot_pipeline&) = delete;

  using stage = std::function<void(std::size_t batch, pipeline_slot& slot)>;
  //! Runs `batches` batches through the slots and returns when every postprocess has finished. Host-blocking (it
  //! drives the pipeline). With `post_threads`, after each submit it hands to the workers the postprocess of every
  //! batch whose GPU work has finished by then (an event query per slot, in batch order), not only when the batch's
  //! slot comes round to be refilled: the workers postprocess while this thread preprocesses, and a slot's
  //! postprocess has usually finished when the slot comes round again. An exception from a stage or a device error stops submitting; batches already submitted
  //! still complete and are postprocessed (unless the device failed), then the first error is rethrown.
  //! @throws cuda_error, or what a stage threw
  void run(std::size_t batches, const stage& pre, const stage& gpu, const stage& post,
           std::source_location where = std::source_location::current());

  std::size_t slot_count() const noexcept { return slots_.size(); }
  pipeline_slot& slot(std::size_t i) noexcept { return slots_[i].slot; }

  // The steps of `run`, for drivers that wait their own way (async_io's `async_run` awaits `done_event`).
  //! The slot batch `b` goes to.
  std::size_t slot_index(std::size_t batch) const noexcept { return batch % slots_.size(); }
  //! Runs `pre` for batch `b` in its slot, then enqueues H2D, `gpu` and D2H and records the slot's done event. The
  //! slot must be free (its previous batch released). Does not wait for the GPU. @throws what a stage threw,
  //! cuda_error
  void submit(std::size_t batch, const stage& pre, const stage& gpu,
              std::source_location where = std::source_location::current());
  //! The batch in flight in slot `i` (SIZE_MAX: none), and the event recorded after its D2H copy.
  std::size_t batch_in(std::size_t i) const noexcept { return slots_[i].batch; }
  event_ref done_event(std::size_t i) const noexcept { return slots_[i].done; }
  //! Runs `post` for the batch in slot `i`, whose done event has completed (recorded as its postprocess stage when
  //! tracing), then frees the slot for its next batch. @throws what `post` threw (the slot is freed either way)
  void postprocess(std::size_t i, const stage& post);
  //! Frees slot `i` for its next batch without postprocessing it (its done event has completed, or failed).
  void release_slot(std::size_t i) noexcept { slots_[i].batch = SIZE_MAX; }

 private:
  struct slot_state {
    pipeline_slot slot;
    stream_pool::lease lease;
    event done;
    std::size_t batch = SIZE_MAX;   // the batch in flight, or SIZE_MAX
    bool post_running = false;      // guarded by mutex_
  };
  // Waits for the slot's GPU work, runs or hands off its post.
  void retire(slot_state& s, const stage& post, std::source_location where);
  // Retires, oldest first, the slots whose GPU work has finished, starting at the one batch `batch` goes to.
  void hand_off_finished(std::size_t batch, const stage& post, std::source_location where);
  void wait_post(slot_state& s);
  void worker();

  slot_pipeline_options options_;
  std::vector<slot_state> slots_;
  // Postprocess workers (when options_.post_threads > 0).
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::exception_ptr post_error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cuasync::runtime
