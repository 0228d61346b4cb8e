// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's stream capture and graphs. A capturing stream's work
// becomes nodes of its capture (submit() in simulated_device.cpp) in the order
// it was issued; an event recorded there and waited on by another stream joins
// that stream (entry_stream.cpp); the end hands out a graph whose launch
// replays the nodes in that order on the launch stream. What the CUDA
// documentation forbids during a capture invalidates it, as the driver does:
// the end then answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph
// (cuda.h on cuStreamBeginCapture, cuThreadExchangeStreamCaptureMode; the
// programming guide's "Prohibited and Unhandled Operations"). Simplifications:
// a launched graph runs its nodes one after another (a gate node holds the
// whole graph, not only its branch); of the node-updating calls those of kernel
// and memset nodes (entry_graph_update.cpp), of the node-adding ones those of
// conditional and empty nodes (entry_conditional.cpp); no
// memory nodes (stream-ordered allocation in a capture is refused); no external
// event wait nodes (a capturing stream's wait on an event recorded outside it is
// refused). External event record nodes are simulated (entry_stream.cpp): each
// launch of the graph records the event at its node.
#include <algorithm>
#include <atomic>

#include "entry_support.hpp"

namespace sim {
namespace {
// A thread's id for "the thread that began the capture" (std::thread::id would
// do; this one is printable).
std::uint64_t this_thread() {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t id = next++;
  return id;
}
thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
}  // namespace

void invalidate(capture_state& c) { c.invalidated = true; }

namespace {
void end(device_model& d, const std::shared_ptr<capture_state>& c) {
  for (auto& [h, other] : d.streams)
    if (other->capture == c) other->capture.reset();
  d.captures.erase(c.get());
  c->ended = true;
}
}  // namespace

void abandon(device_model& d, stream_state& s) {
  std::shared_ptr<capture_state> c = s.capture;
  invalidate(*c);
  if (c->origin == s.id) end(d, c);
  s.capture.reset();
}

CUresult unsafe_call(device_model& d) {
  if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  bool forbidden = false;
  for (capture_state* c : d.captures) {
    if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
    const bool mine = c->thread == this_thread();
    if (mine || (thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      invalidate(*c);
      forbidden = true;
    }
  }
  return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult legacy_stream_use(device_model& d, context_state* ctx) {
  bool implicit = false;
  for (auto& [h, s] : d.streams)
    if (s->capture && s->ctx == ctx && !(s->flags & CU_STREAM_NON_BLOCKING)) {
      invalidate(*s->capture);
      implicit = true;
    }
  return implicit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

namespace api {
namespace {

stream_state* live_stream(device_model& d, CUstream hs) {
  auto it = d.streams.find(hs);
  return it == d.streams.end() ? nullptr : it->second.get();
}

CUstreamCaptureStatus status_of(const stream_state& s) {
  if (!s.capture) return CU_STREAM_CAPTURE_STATUS_NONE;
  return s.capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

// `into`: a graph to capture into (cuStreamBeginCaptureToGraph), null for a new one.
CUresult begin_capture(device_model& d, CUstream hs, CUstreamCaptureMode mode, graph_state* into) {
  lock_t lock(d.m);
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (!s)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // a default stream cannot be
                                                   // captured (here)
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  auto c = std::make_shared<capture_state>();
  c->id = d.next_id++;
  c->mode = mode;
  c->origin = s->id;
  c->thread = this_thread();
  c->into = into;
  c->members[s->id];
  s->capture = c;
  d.captures.insert(c.get());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamBeginCapture(CUstream hs, CUstreamCaptureMode mode) {
  ENTER(cuStreamBeginCapture, unknown);
  return begin_capture(d, hs, mode, nullptr);
}
// The captured nodes join `hg` in order; the dependencies given are earlier nodes of it (that order holds them).
CUresult CUDAAPI StreamBeginCaptureToGraph(CUstream hs, CUgraph hg, const CUgraphNode*, const CUgraphEdgeData*,
                                           size_t, CUstreamCaptureMode mode) {
  ENTER(cuStreamBeginCaptureToGraph, unknown);
  graph_state* g = nullptr;
  {
    lock_t lock(d.m);
    g = find_any_graph(d, hg);
  }
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(d, hs, mode, g);
}

CUresult CUDAAPI StreamEndCapture(CUstream hs, CUgraph* out) {
  ENTER(cuStreamEndCapture, unknown);
  lock_t lock(d.m);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  stream_state* s = live_stream(d, hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  std::shared_ptr<capture_state> c = s->capture;
  if (c->origin != s->id) {  // a joined stream: the capture goes on, invalidated
    invalidate(*c);
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  }
  if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != this_thread())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  end(d, c);
  *out = nullptr;
  if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  for (const auto& [id, m] : c->members)
    if (id != c->origin && m.nodes > m.joined) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  if (c->into) return *out = reinterpret_cast<CUgraph>(c->into), CUDA_SUCCESS;  // its nodes are there already
  auto g = std::make_unique<graph_state>();
  g->ctx = s->ctx;
  g->nodes = std::move(c->nodes);
  return adopt(d, d.graphs, kind::graph, std::move(g), out);
}

CUresult CUDAAPI StreamIsCapturing(CUstream hs, CUstreamCaptureStatus* status) {
  ENTER(cuStreamIsCapturing, unknown);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  const auto v = reinterpret_cast<std::uintptr_t>(hs);
  if (v <= 2) return *status = CU_STREAM_CAPTURE_STATUS_NONE, CUDA_SUCCESS;
  stream_state* s = live_stream(d, hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *status = status_of(*s);
  return CUDA_SUCCESS;
}

// cuStreamGetCaptureInfo_v3 (CUDA 12.3) adds the edges' data (all default here:
// null) to _v2 (11.3).
CUresult capture_info(CUstream hs, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                      const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  ENTER(cuStreamGetCaptureInfo, unknown);
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  stream_state* s = live_stream(d, hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  *status = status_of(*s);
  if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_SUCCESS;
  capture_state::member& m = s->capture->members[s->id];
  if (id) *id = s->capture->id;
  if (graph) *graph = reinterpret_cast<CUgraph>(s->capture.get());  // for identity only: no graph calls take it
  if (deps) *deps = reinterpret_cast<const CUgraphNode*>(&m.last);
  if (edges) *edges = nullptr;
  if (n) *n = m.last ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI StreamGetCaptureInfo_v2(CUstream hs, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                         const CUgraphNode** deps, size_t* n) {
  return capture_info(hs, status, id, graph, deps, nullptr, n);
}
CUresult CUDAAPI StreamGetCaptureInfo_v3(CUstream hs, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                         const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  return capture_info(hs, status, id, graph, deps, edges, n);
}

CUresult CUDAAPI ThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  ENTER(cuThreadExchangeStreamCaptureMode, unknown);
  if (!mode || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, thread_mode);
  return CUDA_SUCCESS;
}

// ---- graphs ----

graph_state* find_graph(std::map<void*, std::unique_ptr<graph_state>>& map, void* h) {
  auto it = map.find(h);
  return it == map.end() ? nullptr : it->second.get();
}

CUresult CUDAAPI GraphInstantiateWithFlags(CUgraphExec* out, CUgraph hg, unsigned long long) {
  ENTER(cuGraphInstantiateWithFlags, oom);
  lock_t lock(d.m);
  // As the driver: the executable graph belongs to the current context, so there must be one.
  if (CUresult r = usable(current_context())) return r;
  graph_state* g = find_graph(d.graphs, hg);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  auto e = std::make_unique<graph_state>(*g);
  e->origin = g;
  instantiate_conditionals(d, *e);
  return adopt(d, d.graph_execs, kind::graph_exec, std::move(e), out);
}
CUresult CUDAAPI GraphLaunch(CUgraphExec he, CUstream hs) {
  ENTER(cuGraphLaunch, no_resources);
  lock_t lock(d.m);
  graph_state* e = find_graph(d.graph_execs, he);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  CUresult r = CUDA_SUCCESS;
  stream_state* s = find_stream(d, hs, &r);
  if (r) return r;
  if (CUresult u = usable(context_of(s))) return u;
  launch_conditionals(d, s, *e);
  for (const graph_node& n : e->nodes) {
    if (!n.enabled) continue;
    const std::uint64_t seq = submit(d, s, n.fn, 0, n.ready, n.type, n.params);  // captured again when s captures
    if (n.event && seq)  // an event record node: the event stands for this launch's node from now on
      if (auto ev = d.events.find(n.event); ev != d.events.end()) {
        ev->second->captured_in.reset();
        ev->second->seq = seq;
      }
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI GraphExecDestroy(CUgraphExec he) {
  ENTER_DESTROY(cuGraphExecDestroy, kind::graph_exec);
  lock_t lock(d.m);
  return forget(d, d.graph_execs, kind::graph_exec,
                he);  // launched work still runs (it holds copies)
}
CUresult CUDAAPI GraphDestroy(CUgraph hg) {
  ENTER_DESTROY(cuGraphDestroy, kind::graph);
  lock_t lock(d.m);
  return forget(d, d.graphs, kind::graph, hg);
}
CUresult CUDAAPI GraphGetNodes(CUgraph hg, CUgraphNode* nodes, size_t* n) {
  ENTER(cuGraphGetNodes, unknown);
  lock_t lock(d.m);
  graph_state* g = find_any_graph(d, hg);
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  if (nodes)
    for (std::size_t i = 0; i < *n; ++i)
      nodes[i] = i < g->nodes.size() ? reinterpret_cast<CUgraphNode>(&g->nodes[i]) : nullptr;
  *n = g->nodes.size();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI GraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  ENTER(cuGraphNodeGetType, unknown);
  if (!node || !type) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  *type = reinterpret_cast<const graph_node*>(node)->type;  // a handle of a live graph (cuGraphGetNodes)
  return CUDA_SUCCESS;
}

}  // namespace

std::span<const entry> capture_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuStreamBeginCapture, StreamBeginCapture),
      CUASYNC_SIM_ENTRY(cuStreamBeginCaptureToGraph, StreamBeginCaptureToGraph),
      CUASYNC_SIM_ENTRY(cuStreamEndCapture, StreamEndCapture),
      CUASYNC_SIM_ENTRY(cuStreamIsCapturing, StreamIsCapturing),
      CUASYNC_SIM_ENTRY(cuThreadExchangeStreamCaptureMode, ThreadExchangeStreamCaptureMode),
      CUASYNC_SIM_ENTRY(cuGraphInstantiateWithFlags, GraphInstantiateWithFlags),
      CUASYNC_SIM_ENTRY(cuGraphLaunch, GraphLaunch),
      CUASYNC_SIM_ENTRY(cuGraphExecDestroy, GraphExecDestroy),
      CUASYNC_SIM_ENTRY(cuGraphDestroy, GraphDestroy),
      CUASYNC_SIM_ENTRY(cuGraphGetNodes, GraphGetNodes),
      CUASYNC_SIM_ENTRY(cuGraphNodeGetType, GraphNodeGetType),
  };
  return table;
}

void* capture_info_entry(int cuda_version) {
  return cuda_version >= 12030 ? reinterpret_cast<void*>(&StreamGetCaptureInfo_v3)
                               : reinterpret_cast<void*>(&StreamGetCaptureInfo_v2);
}

}  // namespace api
}  // namespace sim
