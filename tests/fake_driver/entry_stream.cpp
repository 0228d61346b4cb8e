// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's entry points for streams and events.
#include "entry_support.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace sim::api {
namespace {

// ---- streams ----

// A wait that a capture takes part in: on an event of the waiting stream's own capture, an edge (which joins the
// event's stream back); on an event of a live capture, the waiting stream joins it. Otherwise it would cross the
// capture's boundary: a capturing stream may not wait on work outside it (an external wait node, not simulated),
// nor may any stream wait on an event recorded in a capture that has ended (it stands for no work). Lock held.
CUresult captured_wait(stream_state* s, const event_state& e) {
  const std::shared_ptr<capture_state>& c = e.captured_in;
  if (s && s->capture && s->capture == c) {
    capture_state::member& m = c->members[e.captured_on];
    m.joined = std::max(m.joined, e.captured_at);
    return CUDA_SUCCESS;
  }
  if (s && s->capture) {
    if (!c && !e.seq) return CUDA_SUCCESS;  // never recorded: nothing to wait for
    invalidate(*s->capture);
    return c && !c->ended ? CUDA_ERROR_STREAM_CAPTURE_MERGE : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (c->ended) return CUDA_ERROR_CAPTURED_EVENT;
  if (!s) {  // a default stream cannot join a capture
    invalidate(*c);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  s->capture = c;
  c->members[s->id];
  return CUDA_SUCCESS;
}
// A query or synchronize of a capturing stream: it stands for no work; the capture is invalidated.
CUresult captured_stream_observed(stream_state* s) {
  if (!s || !s->capture) return CUDA_SUCCESS;
  invalidate(*s->capture);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}
// A query, synchronize or timing of an event last recorded in a capture (a live one is invalidated); otherwise an
// event query or synchronize is a "potentially unsafe" call for the capture mode (unsafe_call).
CUresult captured_event_observed(device_model& d, const event_state& e, bool timing = false) {
  if (e.captured_in) {
    if (!e.captured_in->ended) invalidate(*e.captured_in);
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  return timing ? CUDA_SUCCESS : unsafe_call(d);
}

CUresult CUDAAPI StreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  ENTER(cuStreamCreateWithPriority, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  auto s = std::make_unique<stream_state>();
  s->ctx = c;
  s->flags = flags;
  s->priority = std::max(-5, std::min(0, priority));
  s->id = d.next_id++;
  return adopt(d, d.streams, kind::stream, std::move(s), out);
}
CUresult CUDAAPI StreamDestroy(CUstream s) {
  ENTER_DESTROY(cuStreamDestroy, kind::stream);
  lock_t lock(d.m);
  if (auto it = d.streams.find(s); it != d.streams.end() && it->second->capture) abandon(d, *it->second);
  return forget(d, d.streams, kind::stream, s);  // queued work still runs (it holds no stream)
}
CUresult CUDAAPI StreamWaitEvent(CUstream hs, CUevent e, unsigned) {
  ENTER(cuStreamWaitEvent, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  auto it = d.events.find(e);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (it->second->captured_in || (s && s->capture)) return captured_wait(s, *it->second);
  // Work runs in submission order, so the event's work is ahead of anything queued from now on, unless a closed
  // gate holds it: then the stream's later work waits for it.
  if (!finished(d, it->second->seq)) submit(d, s, [] {}, it->second->seq);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamQuery(CUstream hs) {
  const CUresult injected = sim::enter("cuStreamQuery", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (injected) return make_sticky(context_of(s), injected), injected;
  if (r) return r;
  if (CUresult c = captured_stream_observed(s)) return c;
  return (s ? finished(d, s->last) : d.submitted <= d.done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI StreamSynchronize(CUstream hs) {
  const CUresult injected = sim::enter("cuStreamSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (injected) return make_sticky(context_of(s), injected), injected;
  if (r) return r;
  if (CUresult cr = captured_stream_observed(s)) return cr;
  context_state* c = context_of(s);
  if (s)
    wait_done(d, lock, s->last);
  else
    wait_all_done(d, lock);
  return c ? c->sticky : CUDA_SUCCESS;
}
CUresult CUDAAPI LaunchHostFunc(CUstream hs, CUhostFn fn, void* user) {
  ENTER(cuLaunchHostFunc, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [fn, user] { fn(user); }, 0, {}, CU_GRAPH_NODE_TYPE_HOST);
  return CUDA_SUCCESS;
}
template <class F>
CUresult with_stream(device_model& d, CUstream hs, F f) {
  lock_t lock(d.m);
  auto it = d.streams.find(hs);
  if (it == d.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  f(*it->second);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamGetPriority(CUstream hs, int* p) {
  ENTER(cuStreamGetPriority, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *p = s.priority; });
}
CUresult CUDAAPI StreamGetFlags(CUstream hs, unsigned* f) {
  ENTER(cuStreamGetFlags, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *f = s.flags; });
}
CUresult CUDAAPI StreamGetCtx(CUstream hs, CUcontext* c) {
  ENTER(cuStreamGetCtx, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *c = reinterpret_cast<CUcontext>(s.ctx); });
}
CUresult CUDAAPI StreamGetId(CUstream hs, unsigned long long* id) {
  ENTER(cuStreamGetId, unknown);
  return with_stream(d, hs, [&](stream_state& s) { *id = s.id; });
}
template <class T>
CUresult write_value(device_model& d, CUstream hs, CUdeviceptr addr, T value) {
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, addr, &base);
  if (!a || addr + sizeof(T) > base + a->size || addr % sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  submit(d, s, [addr, value] { __atomic_store_n(reinterpret_cast<T*>(addr), value, __ATOMIC_RELEASE); }, 0, {},
         CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamWriteValue64(CUstream s, CUdeviceptr addr, cuuint64_t v, unsigned) {
  ENTER(cuStreamWriteValue64, unknown);
  return write_value<cuuint64_t>(d, s, addr, v);
}
CUresult CUDAAPI StreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned) {
  ENTER(cuStreamWriteValue32, unknown);
  return write_value<cuuint32_t>(d, s, addr, v);
}
// A gate (as sim_wait_u32 is): the stream's later work, and what waits on it, waits until the word compares true; a
// host store opens it. The comparisons are the driver's, GEQ cyclic.
CUresult CUDAAPI StreamWaitValue32(CUstream hs, CUdeviceptr addr, cuuint32_t v, unsigned flags) {
  ENTER(cuStreamWaitValue32, unknown);
  lock_t lock(d.m);
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  std::uintptr_t base = 0;
  allocation* a = find_memory(d, addr, &base);
  if (!a || addr + 4 > base + a->size || addr % 4) return CUDA_ERROR_INVALID_VALUE;
  const unsigned op = flags & 0x3u;
  submit(d, s, [] {}, 0, [&d, addr, v, op] {
    if (!find_memory(d, addr)) return true;  // freed meanwhile: open, as a fault would end it (lock held here)
    const auto w = __atomic_load_n(reinterpret_cast<const cuuint32_t*>(addr), __ATOMIC_ACQUIRE);
    switch (op) {
      case CU_STREAM_WAIT_VALUE_GEQ: return static_cast<std::int32_t>(w - v) >= 0;
      case CU_STREAM_WAIT_VALUE_EQ: return w == v;
      case CU_STREAM_WAIT_VALUE_AND: return (w & v) != 0;
      default: return ~(w | ~v) != 0;  // NOR
    }
  }, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
  return CUDA_SUCCESS;
}

// ---- events ----

CUresult CUDAAPI EventCreate(CUevent* out, unsigned flags) {
  ENTER(cuEventCreate, oom);
  lock_t lock(d.m);
  context_state* c = current_context();
  if (CUresult r = usable(c)) return r;
  auto e = std::make_unique<event_state>();
  e->ctx = c;
  e->flags = flags;
  return adopt(d, d.events, kind::event, std::move(e), out);
}
CUresult CUDAAPI EventDestroy(CUevent e) {
  ENTER_DESTROY(cuEventDestroy, kind::event);
  lock_t lock(d.m);
  return forget(d, d.events, kind::event, e);
}
// The event and stream of a record (lock held).
CUresult record_targets(device_model& d, CUevent he, CUstream hs, event_state** e, stream_state** s) {
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *e = it->second.get();
  CUresult r = CUDA_SUCCESS;
  *s = find_stream(d, hs, &r);
  return r;
}
CUresult CUDAAPI EventRecord(CUevent he, CUstream hs) {
  ENTER(cuEventRecord, unknown);
  lock_t lock(d.m);
  event_state* e = nullptr;
  stream_state* s = nullptr;
  if (CUresult r = record_targets(d, he, hs, &e, &s)) return r;
  e->captured_in.reset();
  if (s && s->capture) {  // a point of the capture, not work (an external record is a node: EventRecordWithFlags)
    e->captured_in = s->capture;
    e->captured_on = s->id;
    e->captured_at = s->capture->members[s->id].nodes;
    e->seq = 0;
    return CUDA_SUCCESS;
  }
  const std::uint64_t seq = d.submitted + 1;
  e->seq = submit(d, s, [&d, he, seq] {
    std::lock_guard l(d.m);
    auto found = d.events.find(he);
    if (found != d.events.end() && found->second->seq == seq) found->second->at_ms = now_ms();
  });
  return CUDA_SUCCESS;
}
// CU_EVENT_RECORD_EXTERNAL (cuda.h): in a capture, an event record node instead of a point of the capture; the event
// is not "captured" (queries of it stay legal) and each launch of the graph records it at the node (GraphLaunch).
// Outside a capture the flag is invalid.
CUresult CUDAAPI EventRecordWithFlags(CUevent he, CUstream hs, unsigned flags) {
  if (!(flags & CU_EVENT_RECORD_EXTERNAL)) return EventRecord(he, hs);
  ENTER(cuEventRecordWithFlags, unknown);
  lock_t lock(d.m);
  event_state* e = nullptr;
  stream_state* s = nullptr;
  if (CUresult r = record_targets(d, he, hs, &e, &s)) return r;
  if (!s || !s->capture) return CUDA_ERROR_INVALID_VALUE;
  capture_state& c = *s->capture;
  submit(d, s, [&d, he] {
    std::lock_guard l(d.m);
    if (auto found = d.events.find(he); found != d.events.end()) found->second->at_ms = now_ms();
  }, 0, {}, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
  c.nodes.back().event = he;
  return CUDA_SUCCESS;
}
CUresult event_status(device_model& d, CUevent he, event_state** out) {
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second.get();
  if (CUresult r = usable((*out)->ctx)) return r;
  return finished(d, (*out)->seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult CUDAAPI EventQuery(CUevent he) {
  const CUresult injected = sim::enter("cuEventQuery", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  if (auto it = d.events.find(he); injected && it != d.events.end()) make_sticky(it->second->ctx, injected);
  if (injected) return injected;
  if (auto it = d.events.find(he); it != d.events.end())
    if (CUresult c = captured_event_observed(d, *it->second)) return c;
  event_state* e = nullptr;
  return event_status(d, he, &e);
}
CUresult CUDAAPI EventSynchronize(CUevent he) {
  const CUresult injected = sim::enter("cuEventSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  device_model& d = model();
  lock_t lock(d.m);
  auto it = d.events.find(he);
  if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (injected) return make_sticky(it->second->ctx, injected), injected;
  if (CUresult c = captured_event_observed(d, *it->second)) return c;
  wait_done(d, lock, it->second->seq);
  event_state* e = nullptr;
  return event_status(d, he, &e);
}
CUresult CUDAAPI EventElapsedTime(float* ms, CUevent a, CUevent b) {
  ENTER(cuEventElapsedTime, unknown);
  lock_t lock(d.m);
  event_state *ea = nullptr, *eb = nullptr;
  for (CUevent h : {a, b})
    if (auto it = d.events.find(h); it != d.events.end())
      if (CUresult c = captured_event_observed(d, *it->second, true)) return c;
  if (CUresult r = event_status(d, a, &ea)) return r;
  if (CUresult r = event_status(d, b, &eb)) return r;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->seq || !eb->seq) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(eb->at_ms - ea->at_ms);
  return CUDA_SUCCESS;
}

}  // namespace

std::span<const entry> stream_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuStreamCreateWithPriority, StreamCreateWithPriority),
      CUASYNC_SIM_ENTRY(cuStreamDestroy, StreamDestroy),
      CUASYNC_SIM_ENTRY(cuStreamWaitEvent, StreamWaitEvent),
      CUASYNC_SIM_ENTRY(cuStreamQuery, StreamQuery),
      CUASYNC_SIM_ENTRY(cuStreamSynchronize, StreamSynchronize),
      CUASYNC_SIM_ENTRY(cuLaunchHostFunc, LaunchHostFunc),
      CUASYNC_SIM_ENTRY(cuStreamGetPriority, StreamGetPriority),
      CUASYNC_SIM_ENTRY(cuStreamGetFlags, StreamGetFlags),
      CUASYNC_SIM_ENTRY(cuStreamGetCtx, StreamGetCtx),
      CUASYNC_SIM_ENTRY(cuStreamGetId, StreamGetId),
      CUASYNC_SIM_ENTRY(cuStreamWriteValue64, StreamWriteValue64),
      CUASYNC_SIM_ENTRY(cuStreamWriteValue32, StreamWriteValue32),
      CUASYNC_SIM_ENTRY(cuStreamWaitValue32, StreamWaitValue32),
      CUASYNC_SIM_ENTRY(cuEventCreate, EventCreate),
      CUASYNC_SIM_ENTRY(cuEventDestroy, EventDestroy),
      CUASYNC_SIM_ENTRY(cuEventRecord, EventRecord),
      CUASYNC_SIM_ENTRY(cuEventRecordWithFlags, EventRecordWithFlags),
      CUASYNC_SIM_ENTRY(cuEventQuery, EventQuery),
      CUASYNC_SIM_ENTRY(cuEventSynchronize, EventSynchronize),
      CUASYNC_SIM_ENTRY(cuEventElapsedTime, EventElapsedTime),
  };
  return table;
}

}  // namespace sim::api
