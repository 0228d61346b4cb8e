// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Devices, runtimes, streams and events.
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/trace/flight_recorder.hpp>

#include <optional>

namespace cuasync::c_api {

namespace {
// A GPU completion on its way to a queue: the engine calls it once, then it goes back for reuse (one per operation
// with a completion: kept off the allocator, whose free on the poller thread and allocation on the caller's would
// cross threads every time).
struct gpu_completion final : completion_callback {
  delivery to;
  gpu_completion* next = nullptr;  // in a list of spare ones
  void complete(std::error_code ec) noexcept override {
    to(ec);
    recycle();
  }
  //! Drops its delivery (the queue's reference) and puts it on the shared stack. Never throws.
  void recycle() noexcept;
  //! A spare one of this thread's, or of the shared stack's, else a new one. @throws std::bad_alloc
  static gpu_completion* take();
};

// Spare gpu_completions: pushed by whichever thread completes them, taken a whole stack at a time by a caller's
// thread into its own list, so no one pops a single node off the shared stack (no ABA). At most as many as were in
// flight at once (admission bounds that).
std::atomic<gpu_completion*> returned_completions{nullptr};
struct spare_completions {
  gpu_completion* head = nullptr;
  ~spare_completions() {
    while (gpu_completion* c = head) {
      head = c->next;
      delete c;
    }
  }
};
thread_local spare_completions spare;

void gpu_completion::recycle() noexcept {
  to = delivery{};
  next = returned_completions.load(std::memory_order_relaxed);
  while (!returned_completions.compare_exchange_weak(next, this, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

gpu_completion* gpu_completion::take() {
  spare_completions& s = spare;
  if (!s.head) s.head = returned_completions.exchange(nullptr, std::memory_order_acquire);
  if (gpu_completion* c = s.head) {
    s.head = c->next;
    return c;
  }
  return new gpu_completion;
}

// The same, delivered only once the host-side work issued on the stream before it is done too.
struct after_host_work final : completion_callback {
  delivery to;
  std::shared_ptr<host_side_work> host;
  std::uint64_t mark = 0;
  void complete(std::error_code ec) noexcept override {
    host->deliver_after(mark, std::move(to), ec);
    delete this;
  }
};

}  // namespace

stream_object::~stream_object() {
  try {
    flush_unreported();
  } catch (...) {
    // The record failed (it waited for the stream): the batch's places are given back with it.
  }
  gate.retire(ref);
}

const admission_site& stream_object::site() const {
  std::call_once(site_once_, [this] { site_ = cuda_completion_source::instance().site_of(ref); });  // retried if it throws
  return site_;
}

admission_ticket admit(const stream_object& s, const char* call, bool hold, std::uint32_t places) {
  cuda_completion_source& source = cuda_completion_source::instance();
  auto try_admit = [&] { return places == 1 ? source.try_admit(s.site(), hold) : source.try_admit_n(s.site(), places); };
  if (places == 1) s.return_spare_credit();  // a tracked operation: launches without a completion keep no spare places
  admission_ticket t = try_admit();
  if (!t) {
    // Places come back when the engine sees their work done, which can lag the GPU (a caller that synchronized its
    // stream and enqueues again at once): look now, then ask again. The pass queries events on this thread: in
    // relaxed capture mode, so that it cannot invalidate a global-mode capture of another thread's (torch.cuda.graph).
    // A partial batch of launches without a completion gets its event first, so that its places can come back too.
    s.flush_unreported();
    {
      thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED);
      completion_callbacks::instance().poll_once();
    }
    t = try_admit();
  }
  if (!t)
    fail(CUASYNC_ERROR_BUSY, std::string(call) + ": " + s.ref.describe() +
                                 " (or its context) has as much work in flight as admitted; retry after a completion");
  return t;
}

bool is_captured(const stream_object& s) {
  if (s.owned && !s.native_handed_out.load(std::memory_order_relaxed)) [[likely]] return false;
  return s.ref.is_capturing();
}

void complete_captured(delivery& to) noexcept {
  if (to) to(std::error_code{});
}

void refuse_if_captured(const stream_object& s, const char* call) {
  if (!is_captured(s)) return;
  fail(CUASYNC_ERROR_INVALID_ARGUMENT,
       std::string(call) + ": " + s.ref.describe() +
           " is being captured into a CUDA graph: its work runs only when the graph is launched, so there is nothing "
           "to wait for now (a query or synchronize would invalidate the capture); wait after the graph's launch");
}

void refuse_if_held(const stream_object& s, const char* call) {
  if (s.host->held())
    fail(CUASYNC_ERROR_BUSY, std::string(call) + ": " + s.ref.describe() +
                                 " is held by a staged pageable copy until its last chunk is enqueued (an event now "
                                 "would come before the rest of the copy); retry after the copy's completion");
}

void complete_after(stream_ref s, admission_ticket ticket, delivery to, std::uint64_t work_key, long long issue_ns) {
  std::optional<trace::flight::awaiter_scope> awaited;  // the flight recorder names the completion awaiting it
  if (trace::flight::enabled() && !trace::flight::awaited_now()) [[unlikely]]
    awaited.emplace(0, to.record.token);
  gpu_completion* c = gpu_completion::take();
  c->to = std::move(to);
  try {
    wait_target t = cuda_completion_source::instance().record_wait(s, std::move(ticket));
    t.work_key = work_key;
    t.issue_ns = issue_ns;
    completion_callbacks::instance().wait(std::move(t), c);
  } catch (...) {
    c->recycle();
    throw;
  }
}

cuasync_error* device_count(cuasync_device_count_args* a) noexcept {
  return call("device_count", a, [](args<cuasync_device_count_args>& x) { x->count = device::count(); });
}

cuasync_error* runtime_create(cuasync_runtime_create_args* a) noexcept {
  return call("runtime_create", a, [](args<cuasync_runtime_create_args>& x) {
    auto r = std::make_shared<runtime_object>();
    // The C ABI's pageable copies up to 256 MiB never hold their stream: a cold one needs the reserved chunks
    // (taken at creation, in the background), else it goes through the ring, which holds the stream (later calls
    // on it are refused BUSY until the copy is done).
    runtime::device_runtime_options options;
    options.reserve_pageable_staging = true;
    if (x->context)
      r->rt = runtime::device_runtime::adopt(context_ref::adopt(static_cast<CUcontext>(x->context)), options);
    else
      r->rt = runtime::device_runtime::create(x->device, options);
    x->runtime = to_handle<cuasync_runtime>(registry::instance().add(kind::runtime, std::move(r)));
  });
}

cuasync_error* runtime_destroy(cuasync_runtime_destroy_args* a) noexcept {
  return call("runtime_destroy", a, [](args<cuasync_runtime_destroy_args>& x) {
    registry::instance().take<runtime_object>(x->runtime, kind::runtime, "runtime");
  });
}

cuasync_error* runtime_admission_get(cuasync_admission_limits_args* a) noexcept {
  return call("runtime_admission_get", a, [](args<cuasync_admission_limits_args>& x) {
    const admission_limits l = runtime_of(x->runtime, "runtime")->rt->events()->get_admission_limits();
    x->per_stream = l.per_stream;
    x->per_context = l.per_context;
  });
}

cuasync_error* runtime_admission_set(cuasync_admission_limits_args* a) noexcept {
  return call("runtime_admission_set", a, [](args<cuasync_admission_limits_args>& x) {
    auto r = runtime_of(x->runtime, "runtime");
    if (x->per_stream != 0 && x->per_context != 0 && x->per_stream > x->per_context)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           "runtime_admission_set: per_stream " + std::to_string(x->per_stream) + " is above per_context " +
               std::to_string(x->per_context) + ": a stream can never have more in flight than its context; lower "
               "per_stream or raise per_context (0 means no bound)");
    r->rt->events()->set_admission_limits({.per_stream = x->per_stream, .per_context = x->per_context});
  });
}

runtime::device_runtime& stream_object::staging_runtime(const char* call) {
  if (owner) return *owner->rt;
  std::lock_guard lock(fallback_mutex_);  // two threads' first pageable copies on one adopted stream
  if (!fallback_) {
    auto rt = runtime::device_runtime::for_device(ref.context().device_ordinal());
    if (!(rt->context() == ref.context()))
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           std::string(call) + ": pageable host memory on an adopted stream of a context other than its device's "
                               "primary one: adopt the stream with that context's runtime, or use pinned memory");
    fallback_ = std::move(rt);
  }
  return *fallback_;
}

cuasync_error* stream_create(cuasync_stream_create_args* a) noexcept {
  return call("stream_create", a, [](args<cuasync_stream_create_args>& x) {
    auto s = std::make_shared<stream_object>();
    if (x->runtime) s->owner = runtime_of(x->runtime, "runtime");
    const auto native = static_cast<CUstream>(x->native);
    if (native == CU_STREAM_LEGACY || native == CU_STREAM_PER_THREAD) {
      // A default stream (PyTorch's and CuPy's default is the legacy one) is one per context: the runtime's.
      if (!s->owner)
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, "stream_create: a default stream (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) "
                                             "is adopted in a runtime's context: give the runtime");
      s->ref = stream_ref(native, s->owner->rt->context());
    } else if (x->native) {
      // A framework's stream: its context is read from it (never assumed from a "current device").
      s->ref = stream_ref::adopt(native);
      if (s->owner && !(s->owner->rt->context() == s->ref.context()))
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, "stream_create: the stream belongs to another context than the runtime's");
    } else {
      if (!s->owner) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "stream_create: give a runtime, or a native stream to adopt");
      s->owned = stream::create(s->owner->rt->context(), {.non_blocking = true, .priority = x->priority});
      s->ref = s->owned;
    }
    x->stream = to_handle<cuasync_stream>(registry::instance().add(kind::stream, std::move(s)));
  });
}

cuasync_error* stream_destroy(cuasync_stream_destroy_args* a) noexcept {
  return call("stream_destroy", a, [](args<cuasync_stream_destroy_args>& x) {
    registry::instance().take<stream_object>(x->stream, kind::stream, "stream");
  });
}

cuasync_error* stream_native(cuasync_stream_native_args* a) noexcept {
  return call("stream_native", a, [](args<cuasync_stream_native_args>& x) {
    auto s = stream_of(x->stream, "stream");
    s->native_handed_out.store(true, std::memory_order_relaxed);  // its caller may capture it from now on
    x->native = s->ref.get();
    x->context = s->ref.context().get();
  });
}

cuasync_error* stream_wait(cuasync_stream_wait_args* a) noexcept {
  return call("stream_wait", a, [](args<cuasync_stream_wait_args>& x) {
    auto s = stream_of(x->stream, "stream");
    delivery to = make_delivery(x->completion, "stream_wait");
    if (!to) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "stream_wait: no queue to complete to");
    refuse_if_captured(*s, "stream_wait");
    s->flush_unreported();  // launches without a completion before it: their places come back with their work
    const std::uint64_t mark = s->host->mark();
    if (mark == 0) {
      complete_after(s->ref, admission_ticket(), std::move(to));  // enqueues nothing: needs no place
      return;
    }
    // A pageable device-to-host copy still copying out of its pinned block, or a staged copy still going.
    auto* c = new after_host_work;
    c->to = std::move(to);
    c->host = s->host;
    c->mark = mark;
    try {
      completion_callbacks::instance().wait(cuda_completion_source::instance().record(s->ref).into_target(), c);
    } catch (...) {
      delete c;
      throw;
    }
  });
}

cuasync_error* event_record(cuasync_event_record_args* a) noexcept {
  return call("event_record", a, [](args<cuasync_event_record_args>& x) {
    auto s = stream_of(x->stream, "stream");
    refuse_if_held(*s, "event_record");
    auto e = std::make_shared<event_object>();
    if (is_captured(*s)) {  // a fork/join point of the capture (legal there), not work
      e->captured.emplace(event::create(s->ref.context()));
      e->captured->record(s->ref);
    } else {
      e->event = event_pool::for_context(s->ref.context())->record(s->ref);
    }
    x->event = to_handle<cuasync_event>(registry::instance().add(kind::event, std::move(e)));
  });
}

cuasync_error* event_query(cuasync_event_query_args* a) noexcept {
  return call("event_query", a, [](args<cuasync_event_query_args>& x) {
    auto e = registry::instance().get<event_object>(x->event, kind::event, "event");
    if (e->captured)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           "event_query: the event was recorded on a stream being captured into a CUDA graph: it marks a point of the "
           "graph, not work that runs now (querying it would invalidate the capture); event_wait on it orders "
           "another stream after that point");
    x->done = e->event.query() ? 1 : 0;
  });
}

cuasync_error* event_wait(cuasync_event_wait_args* a) noexcept {
  return call("event_wait", a, [](args<cuasync_event_wait_args>& x) {
    auto e = registry::instance().get<event_object>(x->event, kind::event, "event");
    if (e->captured) return stream_of(x->stream, "stream")->ref.wait(*e->captured);  // joins the stream to the capture
    e->event.make_wait(stream_of(x->stream, "stream")->ref);
  });
}

cuasync_error* event_destroy(cuasync_event_destroy_args* a) noexcept {
  return call("event_destroy", a, [](args<cuasync_event_destroy_args>& x) {
    registry::instance().take<event_object>(x->event, kind::event, "event");
  });
}

}  // namespace cuasync::c_api
