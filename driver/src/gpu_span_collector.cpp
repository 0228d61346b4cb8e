// The collector of GPU spans (gpu_span_collector.hpp): per-context timing-event pools and references, per-stream
// queues, one thread that converts completed pairs into spans, and the drain trace::snapshot() runs first.
#include "gpu_span_collector.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace cuasync::detail {
namespace {

constexpr std::int64_t reference_lifetime_ns = 2'000'000'000;  // float ms keep ~0.1 µs steps within 2 s

struct reference {
  CUevent event = nullptr;
  trace::gpu_clock_map map;
  std::int64_t created_ns = 0;
};

struct pending {
  timing_events events;
  std::shared_ptr<reference> ref;
  trace::span s;
};

struct context_state {
  CUcontext ctx = nullptr;
  int device = 0;
  bool dead = false;           // a driver call on it failed: it was destroyed
  CUstream idle = nullptr;     // the collector's own stream: a reference recorded there runs at once
  std::vector<std::shared_ptr<reference>> references;  // the newest last; older ones while spans use them
  std::vector<CUevent> free_events;
  std::map<CUstream, std::deque<pending>> queues;
};

// Records a reference on the idle stream and watches it: its host time is known within the loop's step.
std::shared_ptr<reference> new_reference(context_state& c) {
  auto r = std::make_shared<reference>();
  const auto& d = driver();
  if (d.cuEventCreate(&r->event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  if (d.cuEventRecord(r->event, c.idle) != CUDA_SUCCESS) {
    d.cuEventDestroy(r->event);
    return nullptr;
  }
  CUresult q;
  while ((q = d.cuEventQuery(r->event)) == CUDA_ERROR_NOT_READY) std::this_thread::yield();
  const std::int64_t seen = trace::now_ns();
  if (q != CUDA_SUCCESS) {
    d.cuEventDestroy(r->event);
    return nullptr;
  }
  r->map.add_sample(seen, 0);
  r->created_ns = seen;
  return r;
}

class collector {
 public:
  bool acquire(context_ref ctx, timing_events& out) {
    std::lock_guard lock(mutex_);
    context_state* c = state_of(ctx);
    if (!c || c->dead || c->references.empty()) return false;
    scoped_context guard(ctx);
    if (trace::now_ns() - c->references.back()->created_ns > reference_lifetime_ns)
      if (auto r = new_reference(*c)) c->references.push_back(std::move(r));
    const auto& d = driver();
    for (CUevent* e : {&out.begin, &out.end}) {
      if (!c->free_events.empty()) {
        *e = c->free_events.back();
        c->free_events.pop_back();
      } else if (d.cuEventCreate(e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
        if (out.begin && e == &out.end) c->free_events.push_back(out.begin);
        return false;
      }
    }
    out.reference = c->references.back().get();
    return true;
  }

  void release(context_ref ctx, const timing_events& e) {
    std::lock_guard lock(mutex_);
    if (context_state* c = find(ctx.get())) c->free_events.insert(c->free_events.end(), {e.begin, e.end});
  }

  void submit(context_ref ctx, CUstream stream, const timing_events& e, trace::span s) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      context_state* c = find(ctx.get());
      if (!c) return;
      const auto ref = std::find_if(c->references.begin(), c->references.end(),
                                    [&](const auto& r) { return r.get() == e.reference; });
      if (ref == c->references.end()) return;
      c->queues[stream].push_back({e, *ref, std::move(s)});
      if (!thread_.joinable()) start_locked();
      wake = sleeping_;  // a polling collector finds it within 50 us: no wake-up (a futex call) per operation
      sleeping_ = false;
    }
    if (wake) wake_.notify_one();
  }

  // One pass over every queue: the spans whose end event completed are recorded. Returns whether any remain.
  bool pass() {
    std::lock_guard one_pass(pass_mutex_);
    return pass_unlocked();
  }

  // The context is about to be released: its queued spans are waited for and recorded, and the collector's stream,
  // events and references on it destroyed (the next traced operation on it starts afresh).
  void forget(CUcontext ctx) {
    std::lock_guard one_pass(pass_mutex_);
    std::vector<CUevent> last;
    bool dead = true;
    {
      std::lock_guard lock(mutex_);
      context_state* c = find(ctx);
      if (!c) return;
      dead = c->dead;
      for (auto& [stream, queue] : c->queues)
        if (!queue.empty()) last.push_back(queue.back().events.end);
    }
    if (!dead) {
      scoped_push push(ctx);
      for (CUevent e : last) driver().cuEventSynchronize(e);
    }
    pass_unlocked();
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(contexts_.begin(), contexts_.end(), [&](const auto& c) { return c->ctx == ctx; });
    if (it == contexts_.end()) return;
    context_state& c = **it;
    const auto& d = driver();
    if (!c.dead) {
      scoped_push push(c.ctx);
      for (auto& [stream, queue] : c.queues)
        for (const pending& p : queue) c.free_events.insert(c.free_events.end(), {p.events.begin, p.events.end});
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

  // References no queued span uses, but the newest, are destroyed.
  void retire_references(context_state& c) {
    auto& refs = c.references;
    for (std::size_t i = 0; i + 1 < refs.size();)
      if (refs[i].use_count() == 1) {
        driver().cuEventDestroy(refs[i]->event);
        refs.erase(refs.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
  }

  struct taken_queue {
    context_state* c;
    CUstream stream;
    std::deque<pending> queue;
  };

  // A pass with pass_mutex_ held: the queues are taken out under mutex_, read without it (issuing threads never
  // wait for the driver calls), and what is still in flight goes back in front of what was queued meanwhile.
  bool pass_unlocked() {
    std::vector<taken_queue> work;
    {
      std::lock_guard lock(mutex_);
      for (auto& c : contexts_) {
        if (c->dead) continue;
        for (auto& [stream, queue] : c->queues)
          if (!queue.empty()) work.push_back({c.get(), stream, std::exchange(queue, {})});
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
        std::deque<pending>& queue = work[i].queue;
        while (!dead && !queue.empty()) {
          pending& p = queue.front();
          const CUresult r = d.cuEventQuery(p.events.end);
          if (r == CUDA_ERROR_NOT_READY) break;
          const std::int64_t seen = trace::now_ns();
          float begin_ms = 0, end_ms = 0;
          if (r == CUDA_SUCCESS && d.cuEventElapsedTime(&begin_ms, p.ref->event, p.events.begin) == CUDA_SUCCESS &&
              d.cuEventElapsedTime(&end_ms, p.ref->event, p.events.end) == CUDA_SUCCESS) {
            p.ref->map.add_sample(seen, trace::elapsed_ms_to_ns(end_ms));
            p.s.begin_ns = p.ref->map.to_host_ns_from_ms(begin_ms);
            p.s.end_ns = p.ref->map.to_host_ns_from_ms(end_ms);
            trace::record(std::move(p.s));
            freed.push_back({c, p.events.begin});
            freed.push_back({c, p.events.end});
          } else if (r != CUDA_SUCCESS) {
            dead = true;  // the context is gone (or the operation faulted it): nothing more can be read from it
            break;
          }
          queue.pop_front();
        }
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
      if (t.c->dead || t.queue.empty()) continue;
      std::deque<pending>& now = t.c->queues[t.stream];
      t.queue.insert(t.queue.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
      now = std::move(t.queue);
    }
    bool remaining = false;
    for (auto& c : contexts_) {
      if (c->dead) continue;
      for (auto& [stream, queue] : c->queues) remaining |= !queue.empty();
      retire_references(*c);
    }
    return remaining;
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

void forget_context_for_trace(CUcontext ctx) noexcept {
  try {
    if (collector* c = collector::instance.load(std::memory_order_acquire)) c->forget(ctx);
  } catch (...) {
  }
}

void submit_gpu_span(context_ref ctx, CUstream stream, const timing_events& e, trace::span s) noexcept {
  try {
    collector::the_collector().submit(ctx, stream, e, std::move(s));
  } catch (...) {
  }
}

}  // namespace cuasync::detail
