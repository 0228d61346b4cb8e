// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The collector of GPU spans (gpu_span_collector.hpp): per-context timing-event pools and per-stream queues (their
// state in gpu_span_state.hpp), the passes that convert completed end events into spans — run by the engine's poller
// where it is linked (gpu_span_pump.hpp), else by a thread of the collector's own — and the drain trace::snapshot()
// runs first.
#include "gpu_span_collector.hpp"
#include "gpu_span_state.hpp"
#include <cuasync/driver/blocking_free.hpp>

#include <cuasync/driver/detail/gpu_span_pump.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace cuasync::detail {
namespace {

// The engine's pump, when it is linked (gpu_span_pump.hpp); null: the collector's own thread.
std::atomic<void (*)()> pump_start{nullptr};
std::atomic<void (*)() noexcept> pump_poke{nullptr};

class collector {
 public:
  bool acquire(context_ref ctx, timing_events& out) {
    std::lock_guard lock(mutex_);
    context_state* c = state_of(ctx);
    if (!c || c->dead || c->references.empty()) return false;
    if (trace::now_ns() - c->references.back()->created_ns > reference_lifetime_ns) {
      scoped_context guard(ctx);
      if (auto r = new_reference(*c)) c->references.push_back(std::move(r));
    }
    if (!c->free_events.empty()) {
      out.end = c->free_events.back();
      c->free_events.pop_back();
    } else {
      scoped_context guard(ctx);  // only creating an event needs the context current
      if (driver().cuEventCreate(&out.end, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
    }
    out.reference = c->references.back().get();
    return true;
  }

  void release(context_ref ctx, const timing_events& e) {
    std::lock_guard lock(mutex_);
    if (context_state* c = find(ctx.get())) c->free_events.push_back(e.end);
  }

  void submit(context_ref ctx, CUstream stream, std::uint64_t stream_id, const timing_events& e, trace::span s,
              bool marker = false) {
    bool wake = false, poke = false;
    void (*start)() = nullptr;
    {
      std::lock_guard lock(mutex_);
      context_state* c = find(ctx.get());
      if (!c) return;
      const auto ref = std::find_if(c->references.begin(), c->references.end(),
                                    [&](const auto& r) { return r.get() == e.reference; });
      if (ref == c->references.end()) return;
      c->queues[queue_key(stream, stream_id)].spans.push_back({e, *ref, std::move(s), marker});
      if (pumped_) {
        poke = true;
      } else if (thread_.joinable()) {
        wake = sleeping_;  // a polling collector finds it within 50 us: no wake-up (a futex call) per operation
        sleeping_ = false;
      } else if ((start = pump_start.load(std::memory_order_acquire))) {
        pumped_ = true;
      } else {
        start_locked();
      }
    }
    if (wake) wake_.notify_one();
    if (poke) pump_poke.load(std::memory_order_acquire)();
    if (start) start_pump(start);
  }

  // The pump's question between passes: no span in flight? Then it lets the passes go (the next span starts it).
  bool pump_idle() {
    std::lock_guard lock(mutex_);
    for (auto& c : contexts_)
      if (!c->dead)
        for (auto& [key, queue] : c->queues)
          if (!queue.spans.empty()) return false;
    pumped_ = false;
    return true;
  }

  // One pass over every queue: the spans whose end event completed are recorded. Returns whether any remain.
  bool pass() {
    std::lock_guard one_pass(pass_mutex_);
    return pass_unlocked();
  }

  // The context is about to be released: its queued spans are waited for (at most teardown_free_wait) and recorded,
  // and the collector's stream, events and references on it destroyed (the next traced operation on it starts afresh).
  void forget(CUcontext ctx) {
    std::lock_guard one_pass(pass_mutex_);
    std::vector<CUevent> last;
    bool dead = true;
    {
      std::lock_guard lock(mutex_);
      context_state* c = find(ctx);
      if (!c) return;
      dead = c->dead;
      for (auto& [key, queue] : c->queues)
        if (!queue.spans.empty()) last.push_back(queue.spans.back().events.end);
    }
    if (!dead) {
      // Polled, bounded: behind a kernel that never ends, a synchronize would hold this release forever. What has not
      // ended by then is dropped below.
      const auto until = std::chrono::steady_clock::now() + teardown_free_wait;
      for (CUevent e : last)
        while (driver().cuEventQuery(e) == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    pass_unlocked();
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(contexts_.begin(), contexts_.end(), [&](const auto& c) { return c->ctx == ctx; });
    if (it == contexts_.end()) return;
    context_state& c = **it;
    const auto& d = driver();
    if (!c.dead) {
      scoped_push push(c.ctx);
      for (auto& [key, queue] : c.queues)
        for (const pending& p : queue.spans) c.free_events.push_back(p.events.end);
      for (CUevent e : c.free_events) d.cuEventDestroy(e);
      for (const auto& r : c.references) d.cuEventDestroy(r->event);
      if (c.idle) d.cuStreamDestroy(c.idle);
    }
    contexts_.erase(it);
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Makes a context current on the collector's thread for a pass (queries need none, elapsed times may).
  struct scoped_push {
    explicit scoped_push(CUcontext ctx) : pushed(driver().cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {}
    ~scoped_push() {
      CUcontext popped;
      if (pushed) driver().cuCtxPopCurrent(&popped);
    }
    bool pushed;
  };

  context_state* find(CUcontext ctx) {
    for (auto& c : contexts_)
      if (c->ctx == ctx) return c.get();
    return nullptr;
  }

  context_state* state_of(context_ref ctx) {
    if (context_state* c = find(ctx.get())) return c;
    auto c = std::make_unique<context_state>();
    c->ctx = ctx.get();
    c->device = ctx.device_ordinal();
    try {
      scoped_context guard(ctx);
      if (driver().cuStreamCreateWithPriority(&c->idle, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) return nullptr;
      if (auto r = new_reference(*c)) c->references.push_back(std::move(r));
      if (!trace::device_described(c->device)) {
        const device_properties& p = ctx.device().properties();
        trace::describe_device({c->device, p.name, p.multiprocessor_count, p.async_engine_count});
      }
    } catch (...) {
      return nullptr;
    }
    contexts_.push_back(std::move(c));
    return contexts_.back().get();
  }

  struct taken_queue {
    context_state* c;
    std::uint64_t key;
    std::vector<pending> queue;
    std::int64_t last_end_ns;
  };

  // A pass with pass_mutex_ held: the queues are taken out under mutex_, read without it (issuing threads never
  // wait for the driver calls), and what is still in flight goes back in front of what was queued meanwhile.
  bool pass_unlocked() {
    std::vector<taken_queue> work;
    {
      std::lock_guard lock(mutex_);
      for (auto& c : contexts_) {
        if (c->dead) continue;
        for (auto& [key, queue] : c->queues)
          if (!queue.spans.empty())
            work.push_back({c.get(), key, std::exchange(queue.spans, std::move(queue.spare)), queue.last_end_ns});
      }
    }
    const auto& d = driver();
    std::vector<std::pair<context_state*, CUevent>> freed;
    std::vector<context_state*> died;
    for (std::size_t i = 0; i < work.size();) {
      context_state* c = work[i].c;
      scoped_push push(c->ctx);
      bool dead = !push.pushed;  // destroyed by its owner behind cuasync's back
      for (; i < work.size() && work[i].c == c; ++i) {
        std::vector<pending>& queue = work[i].queue;
        std::size_t done = 0;  // the spans recorded from the front
        for (; !dead && done < queue.size(); ++done) {
          pending& p = queue[done];
          // One driver call per span: the elapsed time answers NOT_READY until the end completes (the reference did
          // long ago); a query first cost a second call under the driver's locks the issuing threads take too.
          float end_ms = 0;
          const CUresult r = d.cuEventElapsedTime(&end_ms, p.ref->event, p.events.end);
          if (r == CUDA_ERROR_NOT_READY) break;
          if (r != CUDA_SUCCESS && (is_sticky(r) || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
                                    r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_DEINITIALIZED)) {
            dead = true;  // the context is gone (or the operation faulted it): nothing more can be read from it
            break;
          }
          freed.push_back({c, p.events.end});
          if (r != CUDA_SUCCESS) continue;  // no time for this one (never seen so far): its span is dropped
          p.ref->map.add_sample(trace::now_ns(), trace::elapsed_ms_to_ns(end_ms));
          if (p.marker) {
            work[i].last_end_ns = std::max(work[i].last_end_ns, p.ref->map.to_host_ns_from_ms(end_ms));
            continue;
          }
          // The start: the stream's previous span's end (work on a stream runs in order), or the call's start
          // when that came later (the stream was idle; the GPU started a little after it). Never after the end.
          p.s.end_ns = p.ref->map.to_host_ns_from_ms(end_ms);
          p.s.begin_ns = std::min(std::max(p.s.begin_ns, work[i].last_end_ns), p.s.end_ns);
          work[i].last_end_ns = p.s.end_ns;
          trace::record(std::move(p.s));
        }
        queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(done));
      }
      if (dead) died.push_back(c);
    }
    std::lock_guard lock(mutex_);
    for (context_state* c : died) {
      c->dead = true;
      c->queues.clear();
    }
    for (auto& [c, e] : freed) c->free_events.push_back(e);
    for (taken_queue& t : work) {
      if (t.c->dead) continue;
      stream_queue& now = t.c->queues[t.key];
      now.last_end_ns = t.last_end_ns;
      if (t.queue.empty()) {
        now.spare = std::move(t.queue);  // its capacity, for the next pass
        continue;
      }
      // Still in flight, then what was submitted meanwhile; the latter's vector (emptied) is the next spare.
      t.queue.insert(t.queue.end(), std::make_move_iterator(now.spans.begin()), std::make_move_iterator(now.spans.end()));
      now.spans.clear();
      now.spare = std::exchange(now.spans, std::move(t.queue));
    }
    bool remaining = false;
    for (auto& c : contexts_) {
      if (c->dead) continue;
      for (auto& [key, queue] : c->queues) remaining |= !queue.spans.empty();
      retire_references(*c);
    }
    return remaining;
  }

  // Outside the lock (the pump takes the poller's). A pump that cannot start leaves the spans to a thread of ours.
  void start_pump(void (*start)()) {
    try {
      start();
    } catch (...) {
      std::lock_guard lock(mutex_);
      pumped_ = false;
      if (!thread_.joinable()) start_locked();
    }
  }

  void start_locked() {
    thread_ = std::thread([this] { run(); });
    std::atexit([] { the_collector().stop(); });  // before libcuda's own exit handlers, registered at cuInit
  }

  void run() {
    pthread_setname_np(pthread_self(), "cuasync trace");
    for (;;) {
      const bool remaining = pass();
      std::unique_lock lock(mutex_);
      if (stopping_) return;
      // Work in flight: look again soon (the sample's lateness bounds the clock error); none: sleep until a submit.
      if (remaining) {
        wake_.wait_for(lock, std::chrono::microseconds(50));
      } else {
        sleeping_ = true;  // the next submit wakes it
        wake_.wait_for(lock, std::chrono::milliseconds(20));
        sleeping_ = false;
      }
      if (stopping_) return;
    }
  }

 public:
  static collector& the_collector() {
    static collector* c = [] {
      auto* made = new collector;  // never destroyed: the at-exit write drains it after static destructors ran
      trace::detail::set_gpu_span_drain([] { the_collector().pass(); });
      instance.store(made, std::memory_order_release);
      return made;
    }();
    return *c;
  }
  //! The collector when one was made (nullptr: nothing was ever traced on the GPU).
  static inline std::atomic<collector*> instance{nullptr};

 private:
  std::mutex pass_mutex_;  // one pass at a time (the thread, a drain, a forget); taken before mutex_
  std::mutex mutex_;       // the contexts' pools, references and queues
  std::condition_variable wake_;
  bool sleeping_ = false;  // the thread waits for a submit (nothing was in flight)
  bool pumped_ = false;    // the engine's poller runs the passes (started, and not yet found idle)
  std::vector<std::unique_ptr<context_state>> contexts_;
  std::thread thread_;
  bool stopping_ = false;
};

}  // namespace

bool acquire_timing_events(context_ref ctx, timing_events& out) noexcept {
  try {
    return collector::the_collector().acquire(ctx, out);
  } catch (...) {
    return false;
  }
}

void release_timing_events(context_ref ctx, const timing_events& e) noexcept {
  try {
    collector::the_collector().release(ctx, e);
  } catch (...) {
  }
}

void submit_stream_marker(context_ref ctx, CUstream stream, std::uint64_t stream_id, const timing_events& e) noexcept {
  try {
    collector::the_collector().submit(ctx, stream, stream_id, e, trace::span{}, true);
  } catch (...) {
  }
}

void set_gpu_span_pump(gpu_span_pump pump) noexcept {
  pump_poke.store(pump.poke, std::memory_order_release);
  pump_start.store(pump.start, std::memory_order_release);
}

bool run_gpu_span_pass() noexcept {
  try {
    return collector::the_collector().pass();
  } catch (...) {
    return true;  // out of memory in a pass: look again later
  }
}

bool gpu_span_pump_idle() noexcept {
  try {
    return collector::the_collector().pump_idle();
  } catch (...) {
    return false;
  }
}

void forget_context_for_trace(CUcontext ctx) noexcept {
  try {
    if (collector* c = collector::instance.load(std::memory_order_acquire)) c->forget(ctx);
  } catch (...) {
  }
}

void submit_gpu_span(context_ref ctx, CUstream stream, std::uint64_t stream_id, const timing_events& e,
                     trace::span s) noexcept {
  try {
    collector::the_collector().submit(ctx, stream, stream_id, e, std::move(s));
  } catch (...) {
  }
}

}  // namespace cuasync::detail
