// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/slot_pipeline.hpp>

#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/scope.hpp>

#include <algorithm>
#include <optional>

namespace cuasync::runtime {

namespace {
// A stage as a host span labelled with its batch (the label only built while recording).
struct traced_stage {
  traced_stage(const char* name, std::size_t batch) {
    if (trace::enabled()) [[unlikely]] {
      label.emplace("batch " + std::to_string(batch));
      scope.emplace(trace::category::pipeline_stage, name);
    }
  }
  std::optional<trace::label> label;
  std::optional<trace::scope> scope;  // destroyed first: it reads the label at construction only
};
}  // namespace


slot_pipeline::slot_pipeline(device_runtime& rt, slot_pipeline_options options, std::source_location where)
    : options_(options) {
  if (options_.slots == 0 || options_.input_bytes == 0 || options_.output_bytes == 0)
    cuasync::detail::throw_invalid("cuasync::runtime::slot_pipeline",
                                   "needs at least one slot and non-zero input and output sizes", where);
  slots_.reserve(options_.slots);
  for (std::size_t i = 0; i < options_.slots; ++i) {
    auto lease = rt.streams().borrow(priority::normal, where);
    const stream_ref s = lease.get();
    slots_.push_back({pipeline_slot{.index = i,
                                    .input = rt.pinned()->allocate(options_.input_bytes, where),
                                    .output = rt.pinned()->allocate(options_.output_bytes, where),
                                    .input_device = device_buffer::allocate(rt.context(), options_.input_bytes, where),
                                    .output_device = device_buffer::allocate(rt.context(), options_.output_bytes, where),
                                    .stream = s,
                                    .input_view = {},
                                    .output_view = {}},
                      std::move(lease), event::create(rt.context(), {}, where)});
  }
  for (unsigned i = 0; i < options_.post_threads; ++i) workers_.emplace_back([this] { worker(); });
}

slot_pipeline::~slot_pipeline() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  // Nothing may still read or write the slots' buffers when they are freed.
  for (auto& s : slots_)
    if (s.batch != SIZE_MAX) cuasync::detail::driver().cuEventSynchronize(s.done.get());
}

void slot_pipeline::worker() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void slot_pipeline::wait_post(slot_state& s) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !s.post_running; });
  if (post_error_) std::rethrow_exception(std::exchange(post_error_, nullptr));
}

void slot_pipeline::retire(slot_state& s, const stage& post, std::source_location where) {
  if (s.batch == SIZE_MAX) return;
  const std::size_t batch = std::exchange(s.batch, SIZE_MAX);
  s.done.synchronize(where);  // throws the device error, if any
  if (workers_.empty()) {
    traced_stage traced("postprocess", batch);
    post(batch, s.slot);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    s.post_running = true;
    jobs_.push_back([this, &s, &post, batch] {
      std::exception_ptr error;
      try {
        traced_stage traced("postprocess", batch);
        post(batch, s.slot);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      s.post_running = false;
      if (error && !post_error_) post_error_ = error;
      cv_.notify_all();
    });
  }
  cv_.notify_all();
}

void slot_pipeline::hand_off_finished(std::size_t batch, const stage& post, std::source_location where) {
  // Oldest first: slot (batch + k) % N holds batch batch - N + k. Stops at the first still running (or empty), so
  // postprocesses are handed off in batch order.
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    slot_state& s = slots_[slot_index(batch + k)];
    if (s.batch == SIZE_MAX || !s.done.query(where)) return;
    retire(s, post, where);
  }
}

void slot_pipeline::submit(std::size_t batch, const stage& pre, const stage& gpu, std::source_location where) {
  slot_state& s = slots_[slot_index(batch)];
  if (s.batch != SIZE_MAX)
    cuasync::detail::throw_invalid("cuasync::runtime::slot_pipeline::submit",
                                   "slot " + std::to_string(slot_index(batch)) + " still holds batch " +
                                       std::to_string(s.batch) + ": release it first",
                                   where);
  pipeline_slot& slot = s.slot;
  slot.input_view = std::span<const std::byte>(slot.input.bytes());
  slot.output_view = slot.output.bytes();
  {
    traced_stage traced("preprocess", batch);
    pre(batch, slot);
  }
  traced_stage traced("submit", batch);
  cuasync::copy_async(slot.stream, slot.input_device.span(), slot.input_view, where);
  gpu(batch, slot);
  cuasync::copy_async(slot.stream, slot.output_view,
                      slot.output_device.subspan(0, slot.output_view.size(), where), where);
  s.done.record(slot.stream, where);
  s.batch = batch;
}

void slot_pipeline::postprocess(std::size_t i, const stage& post) {
  slot_state& s = slots_[i];
  struct freed_after {
    slot_state& s;
    ~freed_after() { s.batch = SIZE_MAX; }
  } freed{s};
  traced_stage traced("postprocess", s.batch);
  post(s.batch, s.slot);
}

void slot_pipeline::run(std::size_t batches, const stage& pre, const stage& gpu, const stage& post,
                        std::source_location where) {
  // Synchronous: it returns when the last batch is postprocessed (an io thread should use async_pipeline).
  trace::host_call watched(trace::watch_only(), trace::category::sync, "slot_pipeline::run", 0, 0, &where);
  std::exception_ptr error;
  try {
    for (std::size_t b = 0; b < batches; ++b) {
      slot_state& s = slots_[slot_index(b)];
      retire(s, post, where);  // the slot's previous batch: GPU done, then postprocess
      wait_post(s);     // its host buffers are free again
      submit(b, pre, gpu, where);
      // The batches that finished during this preprocess go to the workers now, not when their slot comes round.
      if (!workers_.empty()) hand_off_finished(b + 1, post, where);
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Drain in batch order, even after an error: batches already submitted are completed and postprocessed (no
  // results are dropped); only a device error, which leaves nothing to postprocess, skips their postprocess.
  std::vector<slot_state*> order;
  for (auto& s : slots_)
    if (s.batch != SIZE_MAX) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->batch < b->batch; });
  for (auto* s : order) {
    try {
      retire(*s, post, where);
    } catch (...) {
      if (!error) error = std::current_exception();
      s->batch = SIZE_MAX;
    }
  }
  for (auto& s : slots_) {
    try {
      wait_post(s);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace cuasync::runtime
