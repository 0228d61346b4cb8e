// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/graph.hpp>

#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/trace/hooks.hpp>

namespace cuasync::runtime {

using cuasync::detail::driver;
using cuasync::detail::throw_cu;

void graph::begin_capture(stream_ref s, std::source_location where) {
  if (CUresult r = driver().cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamBeginCapture", s.describe(), where);
}

void graph::abandon_capture(stream_ref s) noexcept {
  CUgraph g = nullptr;
  if (driver().cuStreamEndCapture(s.get(), &g) == CUDA_SUCCESS && g) driver().cuGraphDestroy(g);
}

graph graph::end_capture(stream_ref s, std::source_location where) {
  graph out;
  if (CUresult r = driver().cuStreamEndCapture(s.get(), &out.graph_); r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamEndCapture",
             s.describe() + (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                                 ? ": an operation in the capture cannot be captured (e.g. a synchronising call)"
                                 : ""),
             where);
  out.ctx_ = s.context();
  return out;
}

graph graph::create(context_ref ctx, std::source_location where) {
  graph out;
  if (CUresult r = driver().cuGraphCreate(&out.graph_, 0); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphCreate", "an empty graph of context " + cuasync::detail::handle_string(ctx.get()), where);
  out.ctx_ = ctx;
  out.handles_ = std::make_shared<handle_list>();
  out.buildable_ = true;
  return out;
}

conditional_handle graph::create_conditional(unsigned default_value, std::source_location where) {
  check_buildable("cuasync::runtime::graph::create_conditional", where);
  scoped_context guard(ctx_, where);
  conditional_handle h;
  if (CUresult r = driver().cuGraphConditionalHandleCreate(&h.value, graph_, ctx_.get(), default_value,
                                                           CU_GRAPH_COND_ASSIGN_DEFAULT);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphConditionalHandleCreate", "graph " + cuasync::detail::handle_string(graph_), where);
  handles_->push_back({h.value, false});
  return h;
}

graph& graph::operator=(graph&& o) noexcept {
  if (this != &o) {
    destroy();  // not ~graph(): the builder's members live on and take `o`'s
    take(std::move(o));
  }
  return *this;
}

graph::~graph() { destroy(); }

void graph::destroy() noexcept {
  if (graph_)
    if (auto* d = cuasync::detail::driver_if_loaded())
      cuasync::detail::defer_error(ctx_.get(), d->cuGraphDestroy(graph_), "cuGraphDestroy", graph_);
  graph_ = nullptr;
}

std::size_t graph::node_count(std::source_location where) const {
  scoped_context guard(ctx_, where);
  std::size_t n = 0;
  if (CUresult r = driver().cuGraphGetNodes(graph_, nullptr, &n); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphGetNodes", "graph " + cuasync::detail::handle_string(graph_), where);
  return n;
}

graph_exec graph::instantiate(std::source_location where) const {
  if (handles_)
    for (const handle_record& h : *handles_)
      if (!h.used)  // the driver may refuse the instantiation for it, saying less
        cuasync::detail::throw_invalid("cuasync::runtime::graph::instantiate",
                                       "graph " + cuasync::detail::handle_string(graph_) + ": conditional handle " +
                                           std::to_string(h.value) + " is used by no conditional node",
                                       where);
  graph_exec e;
  e.ctx_ = ctx_;
  scoped_context guard(ctx_, where);
  trace::host_call watched(trace::watch_only(), trace::category::sync, "cuGraphInstantiateWithFlags", 0, 0, &where);
  if (CUresult r = driver().cuGraphInstantiateWithFlags(&e.exec_, graph_, 0); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphInstantiateWithFlags", "graph " + cuasync::detail::handle_string(graph_), where);
  std::vector<CUgraphNode> nodes(node_count(where));
  std::size_t n = nodes.size();
  if (n) cuasync::detail::check(driver().cuGraphGetNodes(graph_, nodes.data(), &n), "cuGraphGetNodes", where);
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    cuasync::detail::check(driver().cuGraphNodeGetType(node, &type), "cuGraphNodeGetType", where);
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) e.kernel_nodes_.push_back(node);
    if (type == CU_GRAPH_NODE_TYPE_MEMSET) e.memset_nodes_.push_back(node);
  }
  return e;
}

graph_exec& graph_exec::operator=(graph_exec&& o) noexcept {
  if (this != &o) {
    this->~graph_exec();
    new (this) graph_exec(std::move(o));
  }
  return *this;
}

graph_exec::~graph_exec() {
  if (exec_)
    if (auto* d = cuasync::detail::driver_if_loaded()) cuasync::detail::defer_error(ctx_.get(), d->cuGraphExecDestroy(exec_), "cuGraphExecDestroy", exec_);
  exec_ = nullptr;
}

void graph_exec::launch(stream_ref s, std::source_location where) const {
  scoped_context guard(ctx_, where);
  std::optional<cuasync::detail::instrumented_op> traced;  // the whole graph as one span on the stream's lane
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]]
    traced.emplace(hooks, s,
                   cuasync::detail::gpu_op{.category = trace::category::launch, .call = "cuGraphLaunch",
                                           .name = "graph (" + std::to_string(kernel_nodes_.size()) + " kernels)",
                                           .where = where});
  if (CUresult r = driver().cuGraphLaunch(exec_, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphLaunch", "graph exec " + cuasync::detail::handle_string(exec_) + " on " + s.describe(), where);
  if (traced) traced->enqueued();
}

void graph_exec::check_node_index(const char* api, const char* kind, std::size_t index, std::size_t count,
                                  std::source_location where) const {
  if (index >= count)
    cuasync::detail::throw_invalid(api,
                                   std::string(kind) + " node " + std::to_string(index) + " of " +
                                       std::to_string(count) + " (graph exec " +
                                       cuasync::detail::handle_string(exec_) + ")",
                                   where);
}

void graph_exec::update_kernel_node(std::size_t index, const launch_config* config, void** params,
                                    const std::size_t* sizes, std::size_t count, std::source_location where) {
  const char* api = config ? "cuasync::runtime::graph_exec::set_kernel_launch"
                           : "cuasync::runtime::graph_exec::set_kernel_arguments";
  check_node_index(api, "kernel", index, kernel_nodes_.size(), where);
  const std::string node = "kernel node " + std::to_string(index) + " of graph exec " +
                           cuasync::detail::handle_string(exec_);
  if (config && (config->cluster || config->cooperative || config->priority || config->dependent_launch))
    cuasync::detail::throw_invalid(api, node + ": a node keeps the launch attributes it was captured with (cluster, "
                                              "cooperative, priority, dependent launch): recapture to change them",
                                   where);
  scoped_context guard(ctx_, where);  // graph node calls need a current context (instantiate fails without one)
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  cuasync::detail::check(driver().cuGraphKernelNodeGetParams(kernel_nodes_[index], &p), "cuGraphKernelNodeGetParams",
                         where);
  if (!p.func) cuasync::detail::throw_invalid(api, node + " has no CUfunction to check against", where);
  // Check count and sizes against the kernel, as cuasync::launch does: from what cuasync read when it loaded the
  // kernel, else by asking the driver until it refuses an index.
  const cuasync::detail::kernel_info* known = cuasync::detail::known_kernel(p.func);
  std::size_t expected = 0;
  for (;; ++expected) {
    std::size_t offset = 0, size = 0;
    if (known) {
      if (expected == known->params.size()) break;
      size = known->params[expected].size;
    } else if (driver().cuFuncGetParamInfo(p.func, expected, &offset, &size) != CUDA_SUCCESS) {
      break;
    }
    if (expected < count && size != sizes[expected])
      cuasync::detail::throw_invalid(api, node + " parameter " + std::to_string(expected) + " is " +
                                              std::to_string(size) + " bytes but the argument given is " +
                                              std::to_string(sizes[expected]) + " bytes",
                                     where);
  }
  if (expected != count)
    cuasync::detail::throw_invalid(api, node + " takes " + std::to_string(expected) + " parameter(s) but " +
                                            std::to_string(count) + " were given",
                                   where);
  if (config) {
    // The limits a launch is held to; a kernel cuasync did not load is left to the driver, which checks them too.
    if (known && !cuasync::detail::config_fits(*known, *config))
      cuasync::detail::check_config_limits(*known, *config, {}, where);
    p.gridDimX = config->grid.x, p.gridDimY = config->grid.y, p.gridDimZ = config->grid.z;
    p.blockDimX = config->block.x, p.blockDimY = config->block.y, p.blockDimZ = config->block.z;
    p.sharedMemBytes = config->shared_memory_bytes;
  }
  p.kernelParams = params;
  p.extra = nullptr;
  if (CUresult r = driver().cuGraphExecKernelNodeSetParams(exec_, kernel_nodes_[index], &p); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphExecKernelNodeSetParams", node, where);
}

void graph_exec::update_memset_node(std::size_t index, device_span dst, std::uint32_t value, unsigned element_size,
                                    std::source_location where) {
  constexpr const char* api = "cuasync::runtime::graph_exec::set_memset";
  check_node_index(api, "memset", index, memset_nodes_.size(), where);
  const std::string node =
      "memset node " + std::to_string(index) + " of graph exec " + cuasync::detail::handle_string(exec_);
  scoped_context guard(ctx_, where);
  CUDA_MEMSET_NODE_PARAMS p{};
  cuasync::detail::check(driver().cuGraphMemsetNodeGetParams(memset_nodes_[index], &p), "cuGraphMemsetNodeGetParams",
                         where);
  // The driver changes a one-dimensional memset's address and value; its shape stays (it may refuse, or take a new
  // width only sometimes): say so before asking.
  if (p.height != 1)
    cuasync::detail::throw_invalid(api, node + " is two-dimensional: only a one-dimensional memset's address and "
                                               "value change in place",
                                   where);
  if (element_size != p.elementSize)
    cuasync::detail::throw_invalid(api, node + " sets " + std::to_string(p.elementSize) +
                                            "-byte elements but the value given is " + std::to_string(element_size) +
                                            " byte(s)",
                                   where);
  const std::size_t bytes = p.width * p.elementSize;
  if (dst.size != bytes)
    cuasync::detail::throw_invalid(api, node + " sets " + std::to_string(bytes) + " bytes but the range given has " +
                                            std::to_string(dst.size) + ": recapture to change its size",
                                   where);
  if (dst.ptr % element_size)
    cuasync::detail::throw_invalid(api, node + ": the range given is not aligned to its " +
                                            std::to_string(element_size) + "-byte elements",
                                   where);
  p.dst = dst.ptr;
  p.value = value;
  if (CUresult r = driver().cuGraphExecMemsetNodeSetParams(exec_, memset_nodes_[index], &p, ctx_.get());
      r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphExecMemsetNodeSetParams", node, where);
}

void graph_exec::set_kernel_node_enabled(std::size_t index, bool enabled, std::source_location where) {
  check_node_index("cuasync::runtime::graph_exec::set_kernel_node_enabled", "kernel", index, kernel_nodes_.size(),
                   where);
  scoped_context guard(ctx_, where);
  if (CUresult r = driver().cuGraphNodeSetEnabled(exec_, kernel_nodes_[index], enabled ? 1 : 0); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphNodeSetEnabled", "kernel node " + std::to_string(index), where);
}

bool graph_exec::kernel_node_enabled(std::size_t index, std::source_location where) const {
  check_node_index("cuasync::runtime::graph_exec::kernel_node_enabled", "kernel", index, kernel_nodes_.size(),
                   where);
  scoped_context guard(ctx_, where);
  unsigned on = 0;
  if (CUresult r = driver().cuGraphNodeGetEnabled(exec_, kernel_nodes_[index], &on); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphNodeGetEnabled", "kernel node " + std::to_string(index), where);
  return on != 0;
}

}  // namespace cuasync::runtime
