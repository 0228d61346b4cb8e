// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Building a graph piece by piece: pieces captured into it (cuStreamBeginCaptureToGraph) and conditional nodes
// (cuGraphAddNode), each after everything added before it. The builder keeps the nodes the next piece depends on:
// the capturing stream's dependencies at the end of a piece (cuStreamGetCaptureInfo), or the conditional node.
#include <cuasync/runtime/graph.hpp>

#include <algorithm>

namespace cuasync::runtime {

using cuasync::detail::driver;
using cuasync::detail::handle_string;
using cuasync::detail::throw_cu;
using cuasync::detail::throw_invalid;

namespace {
// What a conditional body may hold (CUDA_CONDITIONAL_NODE_PARAMS::phGraph_out in cuda.h); a name for the others.
const char* refused_in_body(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return nullptr;
    case CU_GRAPH_NODE_TYPE_HOST: return "a host function (cuLaunchHostFunc)";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "an event wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "an event record";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: return "an external semaphore signal";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: return "an external semaphore wait";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "a stream-ordered allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "a stream-ordered free";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "a stream memory operation (a write or wait of a value)";
    default: return "a node of a kind conditional bodies do not take";
  }
}
}  // namespace

void graph_builder::take(graph_builder&& o) noexcept {
  graph_ = std::exchange(o.graph_, nullptr);
  ctx_ = o.ctx_;
  handles_ = std::move(o.handles_);
  tail_ = std::move(o.tail_);
  buildable_ = std::exchange(o.buildable_, false);
}

void graph_builder::check_buildable(const char* api, std::source_location where) const {
  if (!graph_) throw_invalid(api, "the graph is empty (moved from)", where);
  if (!buildable_)
    throw_invalid(api,
                  "graph " + handle_string(graph_) +
                      " was captured and takes no more pieces: build it with graph::create and append",
                  where);
}

void graph_builder::begin_append(stream_ref s, std::source_location where) {
  constexpr const char* api = "cuasync::runtime::graph_builder::append";
  check_buildable(api, where);
  if (s.context().get() != ctx_.get())
    throw_invalid(api,
                  s.describe() + " belongs to context " + handle_string(s.context().get()) + ", graph " +
                      handle_string(graph_) + " to context " + handle_string(ctx_.get()),
                  where);
  if (CUresult r = driver().cuStreamBeginCaptureToGraph(s.get(), graph_, tail_.empty() ? nullptr : tail_.data(),
                                                        nullptr, tail_.size(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuStreamBeginCaptureToGraph", s.describe() + " into graph " + handle_string(graph_), where);
}

void graph_builder::abandon_append(stream_ref s) noexcept {
  CUgraph g = nullptr;
  driver().cuStreamEndCapture(s.get(), &g);  // the graph stays the caller's (it is this one)
}

void graph_builder::end_append(stream_ref s, std::source_location where) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode* deps = nullptr;
  std::size_t n = 0;
  CUresult r = driver().cuStreamGetCaptureInfo(s.get(), &status, nullptr, nullptr, &deps, nullptr, &n);
  // Copied now: the driver's array lasts only until the stream's next call.
  std::vector<CUgraphNode> last = r == CUDA_SUCCESS && deps ? std::vector<CUgraphNode>(deps, deps + n)
                                                            : std::vector<CUgraphNode>{};
  CUgraph g = nullptr;
  CUresult e = driver().cuStreamEndCapture(s.get(), &g);
  if (e != CUDA_SUCCESS)
    throw_cu(e, "cuStreamEndCapture",
             s.describe() + " into graph " + handle_string(graph_) +
                 (e == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                      ? ": an operation in the capture cannot be captured (e.g. a synchronising call)"
                      : ""),
             where);
  if (r != CUDA_SUCCESS) throw_cu(r, "cuStreamGetCaptureInfo", s.describe(), where);
  if (!last.empty()) tail_ = std::move(last);  // nothing captured: the next piece depends on what this one did
}

graph_builder::conditional_bodies graph_builder::add_conditional_node(conditional_handle h,
                                                                      CUgraphConditionalNodeType type, unsigned size,
                                                                      const char* api, std::source_location where) {
  check_buildable(api, where);
  auto known = std::find_if(handles_->begin(), handles_->end(),
                            [&](const handle_record& r) { return r.value == h.value; });
  if (known == handles_->end())
    throw_invalid(api,
                  "conditional handle " + std::to_string(h.value) + " was not made by graph::create_conditional "
                  "of the graph " + handle_string(graph_) + " belongs to (a handle of another graph, or none)",
                  where);
  scoped_context guard(ctx_, where);
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = h.value;
  p.conditional.type = type;
  p.conditional.size = size;
  p.conditional.ctx = ctx_.get();
  conditional_bodies out{{nullptr, nullptr}, nullptr, api};
  if (CUresult r = driver().cuGraphAddNode(&out.node, graph_, tail_.empty() ? nullptr : tail_.data(), nullptr,
                                           tail_.size(), &p);
      r != CUDA_SUCCESS)
    throw_cu(r, "cuGraphAddNode",
             std::string(type == CU_GRAPH_COND_TYPE_WHILE ? "a while" : "an if") + " node in graph " +
                 handle_string(graph_),
             where);
  for (unsigned i = 0; i < size; ++i) out.body[i] = p.conditional.phGraph_out[i];  // the driver's, with the node
  known->used = true;
  tail_.assign(1, out.node);
  return out;
}

void graph_builder::check_body(const conditional_bodies& b, unsigned i, std::source_location where) const {
  scoped_context guard(ctx_, where);
  std::size_t n = 0;
  cuasync::detail::check(driver().cuGraphGetNodes(b.body[i], nullptr, &n), "cuGraphGetNodes", where);
  std::vector<CUgraphNode> nodes(n);
  if (n) cuasync::detail::check(driver().cuGraphGetNodes(b.body[i], nodes.data(), &n), "cuGraphGetNodes", where);
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    CUgraphNodeType t{};
    cuasync::detail::check(driver().cuGraphNodeGetType(nodes[k], &t), "cuGraphNodeGetType", where);
    if (const char* what = refused_in_body(t))
      throw_invalid(b.api,
                    std::string(i ? "the else body" : "the body") + " of conditional node " + handle_string(b.node) +
                        " in graph " + handle_string(graph_) + ": its node " + std::to_string(k) + " is " + what +
                        "; a conditional body holds kernels, memsets, copies and conditional nodes only",
                    where);
  }
}

}  // namespace cuasync::runtime
