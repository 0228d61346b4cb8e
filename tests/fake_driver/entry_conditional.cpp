// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's conditional nodes (cuda.h: cuGraphConditionalHandleCreate, cuGraphAddNode with
// CU_GRAPH_NODE_TYPE_CONDITIONAL, CUDA_CONDITIONAL_NODE_PARAMS) and the empty graphs they are built in
// (cuGraphCreate). A handle is a value that device code sets (the simulated kernels call set_conditional, as
// cudaGraphSetConditional does on a GPU); with CU_GRAPH_COND_ASSIGN_DEFAULT it takes its default value at the start
// of every launch of the graph it was made for. An if node runs body 0 when the value is nonzero (body 1, if any,
// when it is 0), a while node runs body 0 again and again while it is nonzero (checked before each run), a switch
// node runs body `value` when there is one. Bodies are graphs the driver owns, filled by capture
// (cuStreamBeginCaptureToGraph, entry_capture.cpp) or by cuGraphAddNode. A conditional node is one work item of its
// launch, which runs the body nodes itself, one after another.
// Simplifications: one value per handle, shared by every instantiation of its graph (launches that overlap share it);
// a gate kernel inside a body holds the whole device thread's view of that launch; a while loop stops after
// FAKE_CUDA_MAX_WHILE_ITERATIONS runs of its body (default 1,000,000) with CUDA_ERROR_LAUNCH_TIMEOUT, sticky, where a
// GPU would spin until killed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "entry_support.hpp"

namespace sim {

struct conditional_value {
  graph_state* owner = nullptr;  // the graph it was made for (identity only)
  context_state* ctx = nullptr;
  unsigned default_value = 0;
  bool assign_default = false;
  std::atomic<unsigned> value{0};
};

struct conditional_node {
  CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
  std::shared_ptr<conditional_value> handle;
  context_state* ctx = nullptr;
  std::vector<std::shared_ptr<graph_state>> bodies;
  std::vector<CUgraph> out;  // what CUDA_CONDITIONAL_NODE_PARAMS::phGraph_out points at
};

namespace {

// Lookups by the handles given out (lock held). Weak: the graphs and nodes that own them decide their lifetime.
std::map<void*, std::weak_ptr<graph_state>>& bodies() {
  static auto* m = new std::map<void*, std::weak_ptr<graph_state>>;  // never destroyed: calls may come during exit
  return *m;
}
std::map<std::uint64_t, std::weak_ptr<conditional_value>>& handles() {
  static auto* m = new std::map<std::uint64_t, std::weak_ptr<conditional_value>>;
  return *m;
}
// Drops the entries whose objects are gone (a weak entry keeps a make_shared object's memory).
template <class Map>
void prune(Map& m) {
  std::erase_if(m, [](const auto& e) { return e.second.expired(); });
}
std::shared_ptr<conditional_value> find_handle(std::uint64_t h) {
  auto it = handles().find(h);
  return it == handles().end() ? nullptr : it->second.lock();
}

std::uint64_t max_while_iterations() {
  static const std::uint64_t n = [] {
    const char* v = std::getenv("FAKE_CUDA_MAX_WHILE_ITERATIONS");
    return v && std::atoll(v) > 0 ? static_cast<std::uint64_t>(std::atoll(v)) : std::uint64_t{1000000};
  }();
  return n;
}

// An instantiated conditional node: its bodies' nodes as they were at instantiation, nested ones frozen too.
struct frozen_conditional {
  CUgraphConditionalNodeType type;
  std::shared_ptr<conditional_value> handle;
  context_state* ctx;
  std::vector<std::vector<graph_node>> bodies;
};

bool healthy(device_model& d, context_state* c) {
  std::lock_guard lock(d.m);
  return c->sticky == CUDA_SUCCESS;
}

// Runs a body's nodes in order on the device thread (lock not held); false once the context has a sticky error.
bool run_body(device_model& d, context_state* c, const std::vector<graph_node>& body) {
  for (const graph_node& n : body) {
    if (n.ready) {
      std::unique_lock lock(d.m);
      while (!n.ready()) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lock.lock();
      }
    }
    if (!healthy(d, c)) return false;
    if (n.fn) n.fn();
  }
  return healthy(d, c);
}

void run(device_model& d, const frozen_conditional& f) {
  const auto value = [&] { return f.handle->value.load(std::memory_order_acquire); };
  switch (f.type) {
    case CU_GRAPH_COND_TYPE_IF:
      if (value()) run_body(d, f.ctx, f.bodies[0]);
      else if (f.bodies.size() > 1) run_body(d, f.ctx, f.bodies[1]);
      break;
    case CU_GRAPH_COND_TYPE_WHILE:
      for (std::uint64_t i = 0; value(); ++i) {
        if (i == max_while_iterations()) {
          std::lock_guard lock(d.m);
          make_sticky(f.ctx, CUDA_ERROR_LAUNCH_TIMEOUT);
          break;
        }
        if (!run_body(d, f.ctx, f.bodies[0])) break;
      }
      break;
    case CU_GRAPH_COND_TYPE_SWITCH:
      if (const unsigned v = value(); v < f.bodies.size()) run_body(d, f.ctx, f.bodies[v]);
      break;
  }
}

// A frozen copy of `n` (lock held): a conditional node's work made from its bodies now; its handles, and those of
// nested bodies, added to `handles`.
graph_node freeze(device_model& d, const graph_node& n, std::vector<std::shared_ptr<conditional_value>>& handles) {
  if (!n.conditional) return n;
  const conditional_node& c = *n.conditional;
  auto f = std::make_shared<frozen_conditional>(frozen_conditional{c.type, c.handle, c.ctx, {}});
  for (const auto& body : c.bodies) {
    handles.insert(handles.end(), body->handles.begin(), body->handles.end());
    auto& nodes = f->bodies.emplace_back();
    for (const graph_node& b : body->nodes) nodes.push_back(freeze(d, b, handles));
  }
  graph_node out = n;
  out.fn = [&d, f] { run(d, *f); };
  return out;
}

bool is_ancestor_or_self(const graph_state* a, const graph_state* g) {
  for (; g; g = g->parent)
    if (g == a) return true;
  return false;
}

}  // namespace

graph_state* find_any_graph(device_model& d, CUgraph h) {
  if (auto it = d.graphs.find(h); it != d.graphs.end()) return it->second.get();
  auto it = bodies().find(h);
  return it == bodies().end() ? nullptr : it->second.lock().get();  // its node keeps it alive while the lock is held
}

void instantiate_conditionals(device_model& d, graph_state& exec) {
  std::vector<std::shared_ptr<conditional_value>> nested;
  for (graph_node& n : exec.nodes)
    if (n.conditional) n = freeze(d, n, nested);
  exec.handles.insert(exec.handles.end(), nested.begin(), nested.end());
}

void launch_conditionals(device_model& d, stream_state* s, const graph_state& exec) {
  std::vector<std::shared_ptr<conditional_value>> reset;
  for (const auto& h : exec.handles)
    if (h->assign_default) reset.push_back(h);
  if (reset.empty()) return;
  submit(d, s, [reset = std::move(reset)] {
    for (const auto& h : reset) h->value.store(h->default_value, std::memory_order_release);
  });
}

CUresult set_conditional(std::uint64_t handle, unsigned value) {
  std::lock_guard lock(model().m);
  std::shared_ptr<conditional_value> h = find_handle(handle);
  if (!h) return CUDA_ERROR_ILLEGAL_ADDRESS;  // what a GPU would do is undefined; a fault is the clearest
  h->value.store(value, std::memory_order_release);
  return CUDA_SUCCESS;
}

namespace api {
namespace {

CUresult CUDAAPI GraphCreate(CUgraph* out, unsigned flags) {
  ENTER(cuGraphCreate, oom);
  if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  auto g = std::make_unique<graph_state>();
  g->ctx = current_context();
  return adopt(d, d.graphs, kind::graph, std::move(g), out);
}

CUresult CUDAAPI GraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph hg, CUcontext hc,
                                              unsigned default_value, unsigned flags) {
  ENTER(cuGraphConditionalHandleCreate, unknown);
  if (!out || (flags & ~unsigned{CU_GRAPH_COND_ASSIGN_DEFAULT})) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  graph_state* g = find_any_graph(d, hg);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  context_state* c = hc ? nullptr : current_context();
  if (hc)
    if (auto it = d.contexts.find(hc); it != d.contexts.end()) c = it->second.get();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult u = usable(c)) return u;
  auto h = std::make_shared<conditional_value>();
  h->owner = g;
  h->ctx = c;
  h->default_value = default_value;
  h->assign_default = flags & CU_GRAPH_COND_ASSIGN_DEFAULT;
  h->value = default_value;
  g->handles.push_back(h);
  *out = reinterpret_cast<std::uintptr_t>(h.get());
  prune(handles());
  handles()[*out] = h;
  return CUDA_SUCCESS;
}

// Conditional and empty nodes; others are left to capture. A new node comes after every node of its graph, which
// keeps the graph's order a valid order of its edges (a dependency is always an earlier node).
CUresult CUDAAPI GraphAddNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, const CUgraphEdgeData*,
                              size_t ndeps, CUgraphNodeParams* params) {
  ENTER(cuGraphAddNode, oom);
  if (!out || !params || (ndeps && !deps)) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  graph_state* g = find_any_graph(d, hg);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < ndeps; ++i) {
    const bool mine = std::any_of(g->nodes.begin(), g->nodes.end(), [&](const graph_node& n) {
      return reinterpret_cast<CUgraphNode>(const_cast<graph_node*>(&n)) == deps[i];
    });
    if (!mine || std::find(deps, deps + i, deps[i]) != deps + i) return CUDA_ERROR_INVALID_VALUE;
  }
  graph_node n;
  n.type = params->type;
  n.ctx = g->ctx ? g->ctx : current_context();
  if (params->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
    CUDA_CONDITIONAL_NODE_PARAMS& p = params->conditional;
    std::shared_ptr<conditional_value> h = find_handle(p.handle);
    // A handle of this graph or of one holding it; a context that is the handle's.
    if (!h || !is_ancestor_or_self(h->owner, g)) return CUDA_ERROR_INVALID_VALUE;
    if ((p.ctx ? p.ctx : reinterpret_cast<CUcontext>(current_context())) != reinterpret_cast<CUcontext>(h->ctx))
      return CUDA_ERROR_INVALID_CONTEXT;
    const bool size_ok = p.type == CU_GRAPH_COND_TYPE_WHILE ? p.size == 1
                         : p.type == CU_GRAPH_COND_TYPE_IF  ? p.size == 1 || p.size == 2
                         : p.type == CU_GRAPH_COND_TYPE_SWITCH && p.size >= 1;
    if (!size_ok) return CUDA_ERROR_INVALID_VALUE;
    prune(bodies());
    auto c = std::make_shared<conditional_node>();
    c->type = p.type;
    c->handle = h;
    c->ctx = h->ctx;
    for (unsigned i = 0; i < p.size; ++i) {
      auto body = std::make_shared<graph_state>();
      body->ctx = h->ctx;
      body->parent = g;
      bodies()[body.get()] = body;
      c->out.push_back(reinterpret_cast<CUgraph>(body.get()));
      c->bodies.push_back(std::move(body));
    }
    p.phGraph_out = c->out.data();
    n.ctx = h->ctx;
    n.conditional = std::move(c);
  } else if (params->type != CU_GRAPH_NODE_TYPE_EMPTY) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  *out = reinterpret_cast<CUgraphNode>(&g->nodes.emplace_back(std::move(n)));
  return CUDA_SUCCESS;
}

}  // namespace

std::span<const entry> conditional_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuGraphCreate, GraphCreate),
      CUASYNC_SIM_ENTRY(cuGraphConditionalHandleCreate, GraphConditionalHandleCreate),
      CUASYNC_SIM_ENTRY(cuGraphAddNode, GraphAddNode),
  };
  return table;
}

}  // namespace api
}  // namespace sim
