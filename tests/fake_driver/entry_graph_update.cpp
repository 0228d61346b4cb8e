// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's node reads and per-node updates of an instantiated graph (cuda.h:
// cuGraphKernelNodeGetParams, cuGraphExecKernelNodeSetParams, cuGraphMemsetNodeGetParams,
// cuGraphExecMemsetNodeSetParams, cuGraphNodeSetEnabled / GetEnabled). A captured kernel or memset node keeps what
// made it (node_params, simulated_device.hpp); an instantiated graph's node is the one at the same index as the
// graph node named, in the graph it was made from. An update replaces the instantiated node's work for later
// launches (one already queued keeps its own copy) and leaves the graph's node as it was, as the driver does; a node
// turned off is not queued by a launch (an empty node). Simplifications: nodes of the top level only (not those in
// conditional bodies); a memset update keeps the node's element size and width (the driver may take another width
// when it fits the node's resources: here never), and its destination must be the same kind of memory.
#include <algorithm>

#include "entry_support.hpp"

namespace sim::api {
namespace {

// The node `h` names in a live graph's top level (lock held); nullptr for any other handle.
graph_node* graph_node_of(device_model& d, CUgraphNode h) {
  for (auto& [handle, g] : d.graphs)
    for (graph_node& n : g->nodes)
      if (reinterpret_cast<CUgraphNode>(&n) == h) return &n;
  return nullptr;
}

// The node of instantiated graph `he` that graph node `h` became (lock held); nullptr when there is none.
graph_node* exec_node_of(device_model& d, CUgraphExec he, CUgraphNode h) {
  auto it = d.graph_execs.find(he);
  if (it == d.graph_execs.end()) return nullptr;
  graph_state& e = *it->second;
  const bool origin_live = std::any_of(d.graphs.begin(), d.graphs.end(),
                                       [&](const auto& g) { return g.second.get() == e.origin; });
  if (!origin_live) return nullptr;
  for (std::size_t i = 0; i < e.origin->nodes.size() && i < e.nodes.size(); ++i)
    if (reinterpret_cast<CUgraphNode>(const_cast<graph_node*>(&e.origin->nodes[i])) == h) return &e.nodes[i];
  return nullptr;
}

// `n` when it is a captured node of type `t` that kept its parameters, else nullptr.
graph_node* kept(graph_node* n, CUgraphNodeType t) {
  const bool has = n && n->type == t &&
                   (t == CU_GRAPH_NODE_TYPE_KERNEL ? n->params.kernel != nullptr : n->params.memset != nullptr);
  return has ? n : nullptr;
}

CUresult CUDAAPI GraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  ENTER(cuGraphKernelNodeGetParams, unknown);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  const graph_node* n = kept(graph_node_of(d, h), CU_GRAPH_NODE_TYPE_KERNEL);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const kernel_node_params& k = *n->params.kernel;
  *p = {};
  p->func = k.func;
  p->gridDimX = k.grid[0], p->gridDimY = k.grid[1], p->gridDimZ = k.grid[2];
  p->blockDimX = k.block[0], p->blockDimY = k.block[1], p->blockDimZ = k.block[2];
  p->sharedMemBytes = k.shared;
  p->ctx = reinterpret_cast<CUcontext>(n->ctx);  // kernelParams stay null: the bytes are the driver's own here
  return CUDA_SUCCESS;
}

CUresult CUDAAPI GraphExecKernelNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  ENTER(cuGraphExecKernelNodeSetParams, unknown);
  if (!p || !p->func) return CUDA_ERROR_INVALID_VALUE;  // a CUkernel instead of a function is not modelled
  lock_t lock(d.m);
  graph_node* n = kept(exec_node_of(d, he, h), CU_GRAPH_NODE_TYPE_KERNEL);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const function_state* f = find_function(d, p->func);
  if (!f || f->module->ctx != n->ctx) return CUDA_ERROR_INVALID_VALUE;  // the owning context cannot change
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  if (CUresult shape = check_launch_shape(*f, grid, block, p->sharedMemBytes)) return shape;
  std::vector<unsigned char> args;
  if (!pack_arguments(*f, p->kernelParams, p->extra, args)) return CUDA_ERROR_INVALID_VALUE;
  n->ready = kernel_gate(*f, args);
  n->params.kernel = std::make_shared<const kernel_node_params>(
      kernel_node_params{p->func, std::make_shared<const function_state>(*f), args, {grid[0], grid[1], grid[2]},
                         {block[0], block[1], block[2]}, p->sharedMemBytes});
  n->fn = kernel_work(d, n->ctx, *f, std::move(args));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI GraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS* p) {
  ENTER(cuGraphMemsetNodeGetParams, unknown);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  const graph_node* n = kept(graph_node_of(d, h), CU_GRAPH_NODE_TYPE_MEMSET);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *p = *n->params.memset;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI GraphExecMemsetNodeSetParams(CUgraphExec he, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS* p,
                                              CUcontext) {
  ENTER(cuGraphExecMemsetNodeSetParams, unknown);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  lock_t lock(d.m);
  graph_node* n = kept(exec_node_of(d, he, h), CU_GRAPH_NODE_TYPE_MEMSET);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMSET_NODE_PARAMS& old = *n->params.memset;
  if (p->height != 1 || old.height != 1 || p->elementSize != old.elementSize || p->width != old.width)
    return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t base = 0, old_base = 0;
  allocation* a = find_memory(d, p->dst, &base);
  allocation* was = find_memory(d, old.dst, &old_base);
  if (!a || p->dst % p->elementSize || p->dst + p->width * p->elementSize > base + a->size ||
      (was && (was->k != a->k || was->ctx != a->ctx)))
    return CUDA_ERROR_INVALID_VALUE;
  n->params.memset = std::make_shared<const CUDA_MEMSET_NODE_PARAMS>(*p);
  n->fn = memset_work(p->dst, p->value, p->width, p->elementSize);
  return CUDA_SUCCESS;
}

CUresult set_enabled(device_model& d, CUgraphExec he, CUgraphNode h, unsigned* get, unsigned set) {
  lock_t lock(d.m);
  graph_node* n = exec_node_of(d, he, h);
  // Kernel, memset and memcpy nodes only (cuda.h on cuGraphNodeSetEnabled).
  if (!n || (n->type != CU_GRAPH_NODE_TYPE_KERNEL && n->type != CU_GRAPH_NODE_TYPE_MEMSET &&
             n->type != CU_GRAPH_NODE_TYPE_MEMCPY))
    return CUDA_ERROR_INVALID_VALUE;
  if (get) *get = n->enabled ? 1 : 0;
  else n->enabled = set != 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI GraphNodeSetEnabled(CUgraphExec he, CUgraphNode h, unsigned on) {
  ENTER(cuGraphNodeSetEnabled, unknown);
  return set_enabled(d, he, h, nullptr, on);
}
CUresult CUDAAPI GraphNodeGetEnabled(CUgraphExec he, CUgraphNode h, unsigned* on) {
  ENTER(cuGraphNodeGetEnabled, unknown);
  if (!on) return CUDA_ERROR_INVALID_VALUE;
  return set_enabled(d, he, h, on, 0);
}

}  // namespace

std::span<const entry> graph_update_entries() {
  static const entry table[] = {
      CUASYNC_SIM_ENTRY(cuGraphKernelNodeGetParams, GraphKernelNodeGetParams),
      CUASYNC_SIM_ENTRY(cuGraphExecKernelNodeSetParams, GraphExecKernelNodeSetParams),
      CUASYNC_SIM_ENTRY(cuGraphMemsetNodeGetParams, GraphMemsetNodeGetParams),
      CUASYNC_SIM_ENTRY(cuGraphExecMemsetNodeSetParams, GraphExecMemsetNodeSetParams),
      CUASYNC_SIM_ENTRY(cuGraphNodeSetEnabled, GraphNodeSetEnabled),
      CUASYNC_SIM_ENTRY(cuGraphNodeGetEnabled, GraphNodeGetEnabled),
  };
  return table;
}

}  // namespace sim::api
