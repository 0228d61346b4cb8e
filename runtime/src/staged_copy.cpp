// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The staged copier's life (the ring allocated in the background, the destructor waiting for what is in flight),
// starting copies, and the callbacks made outside its lock; which copy gets a slot and each chunk's steps are in
// staged_copy_schedule.cpp.
#include <cuasync/runtime/staged_copy.hpp>

#include <cuasync/driver/stream.hpp>

#include <cuasync/driver/detail/grower.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/trace/scope.hpp>
#include "staged_copy_parts.hpp"

#include <algorithm>
#include <optional>

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

// What tells copies' streams apart: the id, since a destroyed stream's handle may come back for a new stream while
// a copy on the old one is still in the ring. The per-thread and legacy handles name one stream per thread (per
// context): the handle, marked, as the engine keys them.
std::uint64_t stream_key_of(stream_ref s, std::source_location where) {
  if (s.get() == CU_STREAM_LEGACY || s.get() == CU_STREAM_PER_THREAD)
    return reinterpret_cast<std::uintptr_t>(s.get()) | (std::uint64_t{1} << 62);
  return s.id(where);
}
}  // namespace

staged_copier::staged_copier(context_ref ctx, staged_copy_options options, std::source_location where)
    : staged_copier(ctx, options, nullptr, where) {}

staged_copier::staged_copier(context_ref ctx, staged_copy_options options, std::shared_ptr<memcpy_team> team,
                             std::source_location where)
    : ctx_(ctx), options_(options), team_(team ? std::move(team) : std::make_shared<memcpy_team>(options.threads)),
      h2d_stores_(options.h2d_stores),
      d2h_stores_(options.d2h_stores) {
  if (options_.chunk_bytes < 4096 || options_.chunks < 2)
    detail::throw_invalid("cuasync::runtime::staged_copier", "needs at least 2 chunks of at least 4 KiB", where);
  if (options_.chunks > (std::size_t{1} << 40) / options_.chunk_bytes)  // the ring's size would wrap, or no host has it
    detail::throw_invalid("cuasync::runtime::staged_copier",
                          std::to_string(options_.chunks) + " chunks of " + std::to_string(options_.chunk_bytes) +
                              " bytes: a ring past 1 TiB",
                          where);
  options_.threads = team_->size();
  events_ = event_pool::for_context(ctx, where);
  for (std::size_t i = 0; i < 2 * options_.chunks; ++i) {
    auto sl = std::make_unique<slot>();
    sl->owner = this;
    slots_.push_back(std::move(sl));  // no memory yet: grow_ring gives it
  }
  for (std::size_t i = 0; i < slots_.size(); i += 2) {
    slots_[i]->partner = slots_[i + 1].get();
    slots_[i + 1]->partner = slots_[i].get();
  }
  ++running_;  // until grow_ring's run() is done: the destructor waits for it
  grow_on_background(where);
}

void staged_copier::grow_on_background(std::source_location where) noexcept {
  // Outside mutex_: at exit the worker may refuse the task, and grow_ring then runs here.
  cuasync::detail::grower_thread().post_or_run([this, where] { grow_ring(where); });
}

void staged_copier::grow_ring(std::source_location where) noexcept {
  // A block per slot, one at a time: the copies waiting start once the first is there (not after the whole ring's
  // allocation, ~0.7 ms per MiB the first time), and no pinned allocation is larger than a chunk (one may keep every
  // other thread's driver calls waiting while it runs). Their callbacks are made once the ring is whole: made
  // between blocks, a callback that blocks (a caller's `enqueued`) would hold the ring at the slots it has.
  outcalls out;
  for (std::size_t i = 0; i < options_.chunks; ++i) {
    pinned_buffer block;
    std::error_code ec;
    std::exception_ptr failure;
    try {
      block = allocate_pinned_block(ctx_, options_.chunk_bytes, where);
    } catch (const std::system_error& e) {
      ec = e.code();
      failure = std::current_exception();
    } catch (...) {
      ec = std::make_error_code(std::errc::not_enough_memory);
    }
    const bool got = static_cast<bool>(block);
    std::lock_guard lock(mutex_);
    if (got) {
      slots_[2 * i]->mem = block.data<std::byte>();
      slots_[2 * i + 1]->mem = block.data<std::byte>() + half_chunk_bytes();
      ring_.push_back(std::move(block));
      ring_state_ = ring_state::ready;
    } else if (ring_.empty()) {
      ring_state_ = ring_state::failed;
      ring_error_ = ec;
      ring_error_detail_ = failure;
    }  // else: the ring stays as large as it got (the copies share fewer slots)
    pump_locked(out);  // the copies that waited for the ring start now (or fail with its error)
    reap_locked(out);
    if (!got) break;
  }
  run(out);  // gives back the running_ count taken by start_growing_locked
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
  {
    std::unique_lock lock(mutex_);
    idle_cv_.wait(lock, [&] { return jobs_.empty() && running_ == here; });
  }
  event_pool::let_go(std::move(events_));  // maybe the pool's last holder (see pinned_pool's destructor)
}

void staged_copier::start_to_device(stream_ref s, device_span dst, std::span<const std::byte> src,
                                    staged_copy_callback* cb, std::source_location where) {
  {
    // Traced apart from the set-up: waking sleeping threads is syscalls on this thread (where a copy's first
    // microseconds go, in the staged sweep probe's trace).
    trace::scope woken(trace::category::staged_copy_chunk, "wake the copy team", 0);
    team_->wake_ahead();  // the copy threads' wake-up overlaps the checks, the stream's id and the first DMA
  }
  trace::scope set_up(trace::category::staged_copy_chunk, "staged copy set-up", src.size());
  check_sizes(to_device_api, src.size(), dst.size, s, where);
  const std::size_t c = chunk_bytes_for(src.size());
  const chunk_layout layout{src.size(), c, options_.ramp};
  start(std::unique_ptr<job>(new job{.to_device = true, .s = s, .stream_key = stream_key_of(s, where),
                                     .host = const_cast<std::byte*>(src.data()), .dev = dst.ptr, .n = src.size(),
                                     .cb = cb, .layout = layout, .total = layout.count(),
                                     .whole_chunks = c > half_chunk_bytes(), .where = where}));
}

void staged_copier::start_to_host(stream_ref s, std::span<std::byte> dst, device_span src, staged_copy_callback* cb,
                                  std::source_location where) {
  {
    trace::scope woken(trace::category::staged_copy_chunk, "wake the copy team", 0);
    team_->wake_ahead();
  }
  trace::scope set_up(trace::category::staged_copy_chunk, "staged copy set-up", src.size);
  check_sizes(to_host_api, src.size, dst.size(), s, where);
  const std::size_t c = chunk_bytes_for(src.size);
  const chunk_layout layout{src.size, c, options_.ramp};
  start(std::unique_ptr<job>(new job{.to_device = false, .s = s, .stream_key = stream_key_of(s, where),
                                     .host = dst.data(), .dev = src.ptr, .n = src.size, .cb = cb, .layout = layout,
                                     .total = layout.count(), .whole_chunks = c > half_chunk_bytes(),
                                     .where = where}));
}

std::size_t staged_copier::half_chunk_bytes() const noexcept {
  // Whole 4 KiB pages: the upper half starts on a page of its own.
  return (options_.chunk_bytes / 2) & ~std::size_t{4095};
}

std::size_t staged_copier::chunk_bytes_for(std::size_t n) const noexcept {
  const std::size_t half = half_chunk_bytes();
  return n < options_.half_chunks_below && half >= 4096 ? half : options_.chunk_bytes;
}

void staged_copier::start(std::unique_ptr<job> j) {
  outcalls out;
  std::optional<std::source_location> regrow;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(j));
    team_->hold_awake();  // until the copy is reported done (report_done_locked)
    if (ring_state_ == ring_state::failed) {  // try again for this copy
      ring_state_ = ring_state::growing;
      ++running_;  // as in the constructor
      regrow = jobs_.back()->where;
    }
    pump_locked(out);
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  if (regrow) grow_on_background(*regrow);
  run(out);
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
  // for this on another thread) may free it as soon as the lock is released. Told at every count, not only at zero:
  // a destructor called from a callback on another thread waits for the count of its own thread's frames (1), so a
  // notification at zero only never came (the copier destroyed in a D2H done call on a copy thread while the grower
  // thread's run() was still counted: ~2% of runs hung, session 23).
  std::lock_guard lock(mutex_);
  --running_;
  if (jobs_.empty()) idle_cv_.notify_all();
}

}  // namespace cuasync::runtime
