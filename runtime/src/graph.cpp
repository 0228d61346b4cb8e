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

graph& graph::operator=(graph&& o) noexcept {
  if (this != &o) {
    this->~graph();
    graph_ = std::exchange(o.graph_, nullptr);
    ctx_ = o.ctx_;
  }
  return *this;
}

graph::~graph() {
  if (graph_)
    if (auto* d = cuasync::detail::driver_if_loaded()) cuasync::detail::defer_error(ctx_.get(), d->cuGraphDestroy(graph_), "cuGraphDestroy", graph_);
}

std::size_t graph::node_count(std::source_location where) const {
  scoped_context guard(ctx_, where);
  std::size_t n = 0;
  if (CUresult r = driver().cuGraphGetNodes(graph_, nullptr, &n); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphGetNodes", "graph " + cuasync::detail::handle_string(graph_), where);
  return n;
}

graph_exec graph::instantiate(std::source_location where) const {
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
                                           .name = "graph (" + std::to_string(kernel_nodes_.size()) + " kernels)"});
  if (CUresult r = driver().cuGraphLaunch(exec_, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphLaunch", "graph exec " + cuasync::detail::handle_string(exec_) + " on " + s.describe(), where);
  if (traced) traced->enqueued();
}

void graph_exec::set_kernel_params(std::size_t index, void** params, const std::size_t* sizes, std::size_t count,
                                   std::source_location where) {
  constexpr const char* api = "cuasync::runtime::graph_exec::set_kernel_arguments";
  if (index >= kernel_nodes_.size())
    cuasync::detail::throw_invalid(
        api, "kernel node " + std::to_string(index) + " of " + std::to_string(kernel_nodes_.size()), where);
  scoped_context guard(ctx_, where);  // graph node calls need a current context (instantiate fails without one)
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  cuasync::detail::check(driver().cuGraphKernelNodeGetParams(kernel_nodes_[index], &p), "cuGraphKernelNodeGetParams",
                         where);
  if (!p.func)
    cuasync::detail::throw_invalid(api, "kernel node " + std::to_string(index) + " has no CUfunction to check against",
                                   where);
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
      cuasync::detail::throw_invalid(api, "kernel node " + std::to_string(index) + " parameter " +
                                              std::to_string(expected) + " is " + std::to_string(size) +
                                              " bytes but the argument given is " + std::to_string(sizes[expected]) +
                                              " bytes",
                                     where);
  }
  if (expected != count)
    cuasync::detail::throw_invalid(api, "kernel node " + std::to_string(index) + " takes " + std::to_string(expected) +
                                            " parameter(s) but " + std::to_string(count) + " were given",
                                   where);
  p.kernelParams = params;
  p.extra = nullptr;
  if (CUresult r = driver().cuGraphExecKernelNodeSetParams(exec_, kernel_nodes_[index], &p); r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphExecKernelNodeSetParams", "kernel node " + std::to_string(index), where);
}

}  // namespace cuasync::runtime
