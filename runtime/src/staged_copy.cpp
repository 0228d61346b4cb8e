#include <cuasync/runtime/staged_copy.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/scope.hpp>

#include <algorithm>

namespace cuasync::runtime {

namespace {
// The asynchronous forms' errors name the synchronous call's api too (they are what it runs).
constexpr const char* to_device_api = "cuasync::runtime::staged_copier::copy_to_device";
constexpr const char* to_host_api = "cuasync::runtime::staged_copier::copy_to_host";

void check_sizes(const char* api, std::size_t n, std::size_t room, stream_ref s, std::source_location where) {
  if (!s) detail::throw_invalid(api, "empty stream", where);
  if (n == 0) detail::throw_invalid(api, "zero-size copy on " + s.describe(), where);
  if (n > room)
    detail::throw_invalid(api,
                          "copy of " + std::to_string(n) + " bytes into a destination of " + std::to_string(room) +
                              " bytes on " + s.describe(),
                          where);
}
}  // namespace

// One copy: its chunks go through the ring in turn.
struct staged_copier::job {
  bool to_device;
  stream_ref s;
  std::byte* host;
  CUdeviceptr dev;
  std::size_t n;
  staged_copy_callback* cb;
  std::size_t total;          // chunks
  std::size_t started = 0;    // chunks given a slot (H2D: fill submitted; D2H: DMA enqueued)
  std::size_t dmas = 0;       // chunk DMAs enqueued
  std::size_t finished = 0;   // chunks whose slot is free again
  std::size_t in_flight = 0;  // chunks holding a slot
  std::error_code error{};    // the first error; no chunk is started after it
  bool streaming = false;     // non-temporal stores for this copy's host copies
  std::source_location where;  // the caller's, for the errors of chunks enqueued later
  bool reported_enqueued = false;  // `enqueued` is decided (a thread is about to call it)
  bool enqueued_called = false;    // ... and has returned: `done` may follow
  bool reported_done = false;
  std::exception_ptr error_detail{};  // the error's description, when a call failed (not for a failed DMA)
  bool asked = false;      // its stream was asked whether it is busy (once, at the first slot)
  bool throttled = false;  // it was: one slot until a DMA of this copy has completed
  bool stopped() const noexcept { return error || started == total; }
  // No DMA of this copy is still to come: a later copy on its stream may take slots.
  bool all_enqueued() const noexcept { return error || dmas == total; }
  std::size_t offset(std::size_t chunk, std::size_t cb_bytes) const noexcept { return chunk * cb_bytes; }
};

// A ring slot, and the engine wait on its DMA's event.
struct staged_copier::slot final : completion_callback {
  staged_copier* owner = nullptr;
  std::byte* mem = nullptr;
  job* j = nullptr;  // null: free
  std::size_t chunk = 0, len = 0;
  void complete(std::error_code ec) noexcept override { owner->on_dma_done(*this, ec); }
};

// Callbacks decided under the lock, made after it.
struct staged_copier::outcalls {
  std::vector<job*> enqueued;  // jobs stay (not reaped) until their `enqueued` call has returned
  struct done_call {
    staged_copy_callback* cb;
    std::error_code ec;
    std::exception_ptr detail;
  };
  std::vector<done_call> done;
  std::vector<std::unique_ptr<job>> finished_jobs;
};

staged_copier::staged_copier(context_ref ctx, staged_copy_options options, std::source_location where)
    : ctx_(ctx), options_(options), team_(options.threads) {
  if (options_.chunk_bytes < 4096 || options_.chunks < 2)
    detail::throw_invalid("cuasync::runtime::staged_copier", "needs at least 2 chunks of at least 4 KiB", where);
  if (options_.chunks > (std::size_t{1} << 40) / options_.chunk_bytes)  // the ring's size would wrap, or no host has it
    detail::throw_invalid("cuasync::runtime::staged_copier",
                          std::to_string(options_.chunks) + " chunks of " + std::to_string(options_.chunk_bytes) +
                              " bytes: a ring past 1 TiB",
                          where);
  options_.threads = team_.size();
  events_ = event_pool::for_context(ctx, where);
  ring_ = pinned_buffer::allocate(ctx, options_.chunk_bytes * options_.chunks, where);
  for (std::size_t i = 0; i < options_.chunks; ++i) {
    auto sl = std::make_unique<slot>();
    sl->owner = this;
    sl->mem = ring_.data<std::byte>() + i * options_.chunk_bytes;
    slots_.push_back(std::move(sl));
  }
}

namespace {
// A copier making callbacks on this thread (run(), innermost first): a callback that destroys its copier (a done
// call releasing the last reference to the runtime that owns it) marks the frame, and run() then touches nothing of it.
struct callback_frame {
  const staged_copier* copier;
  bool destroyed = false;
  callback_frame* outer;
};
thread_local callback_frame* innermost_frame = nullptr;

// Marks this thread's frames of `c` destroyed; returns how many there are.
std::size_t mark_destroyed(const staged_copier* c) noexcept {
  std::size_t n = 0;
  for (callback_frame* f = innermost_frame; f; f = f->outer)
    if (f->copier == c) {
      f->destroyed = true;
      ++n;
    }
  return n;
}
}  // namespace

staged_copier::~staged_copier() {
  // Called from one of its own callbacks, this thread's run() frames are not waited for (they would never end).
  const std::size_t here = mark_destroyed(this);
  std::unique_lock lock(mutex_);
  idle_cv_.wait(lock, [&] { return jobs_.empty() && running_ == here; });
}

void staged_copier::start_to_device(stream_ref s, device_span dst, std::span<const std::byte> src,
                                    staged_copy_callback* cb, std::source_location where) {
  check_sizes(to_device_api, src.size(), dst.size, s, where);
  const std::size_t total = (src.size() + options_.chunk_bytes - 1) / options_.chunk_bytes;
  start(std::unique_ptr<job>(new job{.to_device = true, .s = s, .host = const_cast<std::byte*>(src.data()),
                                     .dev = dst.ptr, .n = src.size(), .cb = cb, .total = total,
                                     .streaming = options_.h2d_streaming_stores, .where = where}));
}

void staged_copier::start_to_host(stream_ref s, std::span<std::byte> dst, device_span src, staged_copy_callback* cb,
                                  std::source_location where) {
  check_sizes(to_host_api, src.size, dst.size(), s, where);
  const std::size_t total = (src.size + options_.chunk_bytes - 1) / options_.chunk_bytes;
  start(std::unique_ptr<job>(new job{.to_device = false, .s = s, .host = dst.data(), .dev = src.ptr, .n = src.size,
                                     .cb = cb, .total = total,
                                     .streaming = src.size >= options_.d2h_streaming_from_bytes, .where = where}));
}

void staged_copier::start(std::unique_ptr<job> j) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(j));
    pump_locked(out);
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::pump_locked(outcalls& out) {
  // One slot at a time: a failed start frees its slot and stops its job (a nested pump may take slots meanwhile), so
  // each turn looks again.
  for (;;) {
    auto free_slot = std::find_if(slots_.begin(), slots_.end(), [](const auto& sl) { return !sl->j; });
    if (free_slot == slots_.end()) return;
    job* j = next_taker_locked();
    if (!j) return;
    if (!j->asked) {
      // Once per copy, never per chunk: a lone copy on an idle stream keeps today's path.
      j->asked = true;
      // Behind an earlier copy of ours on its stream, the stream is busy with that copy's last DMAs: not a reason to
      // hold back (back-to-back copies keep the whole ring); it inherits that copy's answer instead of asking.
      const job* before = nullptr;
      for (const auto& e : jobs_) {
        if (e.get() == j) break;
        if (e->s == j->s) before = e.get();
      }
      if (before) {
        j->throttled = before->throttled;
        start_chunk_locked(*j, **free_slot, out);
        continue;
      }
      try {
        // Relaxed, as the poller is: in global mode the query would invalidate another thread's capture (PyTorch's).
        thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED, j->where);
        j->throttled = !j->s.query(j->where);
      } catch (const std::system_error& e) {
        j->error_detail = std::current_exception();
        fail_locked(*j, e.code(), out);
        continue;
      } catch (...) {
        fail_locked(*j, std::make_error_code(std::errc::not_enough_memory), out);
        continue;
      }
    }
    start_chunk_locked(*j, **free_slot, out);
  }
}

staged_copier::job* staged_copier::next_taker_locked() {
  job* taker = nullptr;
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    job& j = *jobs_[i];
    if (j.stopped() || (j.throttled && j.in_flight > 0)) continue;
    if (taker && taker->in_flight <= j.in_flight) continue;  // the fewest slots first; the earlier on a tie
    const bool behind_on_its_stream = std::any_of(jobs_.begin(), jobs_.begin() + static_cast<std::ptrdiff_t>(i),
                                                  [&](const auto& e) { return e->s == j.s && !e->all_enqueued(); });
    if (!behind_on_its_stream) taker = &j;
  }
  return taker;
}

void staged_copier::fail_locked(job& j, std::error_code ec, outcalls& out) {
  if (!j.error) j.error = ec;
  report_done_locked(j, out);  // holds no slot: done now
}

void staged_copier::start_chunk_locked(job& j, slot& sl, outcalls& out) {
  sl.j = &j;
  sl.chunk = j.started++;
  sl.len = std::min(options_.chunk_bytes, j.n - sl.chunk * options_.chunk_bytes);
  ++j.in_flight;
  if (!j.to_device) return enqueue_dma_locked(j, sl, out);
  try {
    team_.submit(sl.mem, j.host + sl.chunk * options_.chunk_bytes, sl.len, j.streaming, [this, &sl] { on_filled(sl); });
  } catch (...) {
    chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
  }
}

void staged_copier::enqueue_dma_locked(job& j, slot& sl, outcalls& out) {
  const std::size_t off = sl.chunk * options_.chunk_bytes;
  detail::copy_category_scope traced_as(trace::category::staged_copy_chunk);  // the DMA of one chunk, not a copy
  try {
    if (j.to_device)
      cuasync::copy_async(j.s, device_span{j.dev + off, sl.len}, std::span<const std::byte>(sl.mem, sl.len), j.where);
    else
      cuasync::copy_async(j.s, std::span<std::byte>(sl.mem, sl.len), device_span{j.dev + off, sl.len}, j.where);
    pooled_event ev = events_->record(j.s, j.where);
    ++j.dmas;
    if (j.dmas == j.total && !j.reported_enqueued) {
      j.reported_enqueued = true;
      out.enqueued.push_back(&j);
    }
    completion_callbacks::instance().wait(std::move(ev).into_target(), &sl);
  } catch (const std::system_error& e) {
    if (!j.error) j.error_detail = std::current_exception();
    chunk_finished_locked(j, sl, e.code(), out);
  } catch (...) {
    chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
  }
}

void staged_copier::on_filled(slot& sl) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    job& j = *sl.j;
    if (j.error) {
      chunk_finished_locked(j, sl, {}, out);  // a chunk failed meanwhile: this one is not sent
    } else {
      enqueue_dma_locked(j, sl, out);
      if (j.all_enqueued()) pump_locked(out);  // its last DMA: a later copy on its stream may start
    }
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::on_dma_done(slot& sl, std::error_code ec) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    job& j = *sl.j;
    const bool was_throttled = j.throttled;
    j.throttled = false;  // the work ahead of it on its stream is done
    if (j.to_device || ec || j.error) {
      chunk_finished_locked(j, sl, ec, out);
    } else {
      try {
        const std::size_t off = sl.chunk * options_.chunk_bytes;
        team_.submit(j.host + off, sl.mem, sl.len, j.streaming, [this, &sl] { on_drained(sl); });
      } catch (...) {
        chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
      }
      if (was_throttled) pump_locked(out);  // it holds its slot until drained: the free ones are its to take now
    }
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::on_drained(slot& sl) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    chunk_finished_locked(*sl.j, sl, {}, out);
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::chunk_finished_locked(job& j, slot& sl, std::error_code ec, outcalls& out) {
  if (ec && !j.error) j.error = ec;
  sl.j = nullptr;
  --j.in_flight;
  ++j.finished;
  report_done_locked(j, out);
  pump_locked(out);
}

void staged_copier::report_done_locked(job& j, outcalls& out) {
  // Never before `enqueued` has returned: the last chunk may complete (on another thread) while `enqueued` is still
  // being called, and `done` may free the callback.
  if (j.reported_enqueued && !j.enqueued_called) return;
  if (j.in_flight == 0 && (j.error || j.finished == j.total) && !j.reported_done) {
    j.reported_done = true;
    out.done.push_back({j.cb, j.error, j.error_detail});
  }
}

void staged_copier::reap_locked(outcalls& out) {
  // Outside any iteration over jobs_ (pump_locked's), so erasing is safe.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if ((*it)->reported_done) {
      out.finished_jobs.push_back(std::move(*it));
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

void staged_copier::run(outcalls& out) noexcept {
  callback_frame frame{this, false, innermost_frame};
  innermost_frame = &frame;
  struct pop {
    callback_frame& f;
    ~pop() { innermost_frame = f.outer; }
  } popped{frame};
  if (!out.enqueued.empty()) {
    for (job* j : out.enqueued) j->cb->enqueued();
    if (frame.destroyed) {  // then nothing was left in flight: the destructor waited for that
      for (auto& d : out.done) d.cb->done(d.ec, d.detail);
      return;
    }
    std::lock_guard lock(mutex_);
    for (job* j : out.enqueued) {
      j->enqueued_called = true;
      report_done_locked(*j, out);  // its last chunk may have completed meanwhile
    }
    reap_locked(out);
  }
  for (auto& d : out.done) d.cb->done(d.ec, d.detail);
  if (frame.destroyed) return;
  // Last, under the lock: a `done` call may have let go of what kept the copier alive, and its destructor (waiting
  // for this on another thread) may free it as soon as the lock is released.
  std::lock_guard lock(mutex_);
  if (--running_ == 0 && jobs_.empty()) idle_cv_.notify_all();
}

}  // namespace cuasync::runtime
