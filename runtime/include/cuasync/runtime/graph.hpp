#pragma once
//! @file CUDA graphs: capture the work a function enqueues on a stream (launches, copies, memsets) into a graph,
//! instantiate it once, relaunch it many times (one driver call per relaunch instead of one per operation), and
//! update kernel arguments of the instantiated graph in place.

#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>

#include <array>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuasync::runtime {

class graph_exec;

//! A kernel node's index and the caller's source location: `graph_exec::set_kernel_arguments` takes its index as
//! this, because its last parameters are variadic (as launches take a `located_stream`).
struct located_node {
  std::size_t index;
  std::source_location where;
  located_node(std::size_t i, std::source_location w = std::source_location::current()) noexcept
      : index(i), where(w) {}
};

//! A captured graph. Move-only.
class graph {
 public:
  graph() = default;
  //! Captures everything `enqueue(s)` enqueues on `s` (thread-local capture mode: other threads' CUDA calls are not
  //! affected). Nothing runs during capture. If `enqueue` throws, the capture is ended and discarded and the
  //! exception propagates. @throws cuda_error (e.g. an operation that cannot be captured)
  template <class F>
  static graph capture(stream_ref s, F&& enqueue, std::source_location where = std::source_location::current()) {
    begin_capture(s, where);
    try {
      std::forward<F>(enqueue)(s);
    } catch (...) {
      abandon_capture(s);
      throw;
    }
    return end_capture(s, where);
  }
  graph(graph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)), ctx_(o.ctx_) {}
  graph& operator=(graph&& o) noexcept;
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  ~graph();

  CUgraph get() const noexcept { return graph_; }
  //! Number of nodes (operations) captured.
  std::size_t node_count(std::source_location where = std::source_location::current()) const;
  //! Instantiates the graph for launching. @throws cuda_error
  graph_exec instantiate(std::source_location where = std::source_location::current()) const;

 private:
  static void begin_capture(stream_ref s, std::source_location where);
  static void abandon_capture(stream_ref s) noexcept;
  static graph end_capture(stream_ref s, std::source_location where);
  CUgraph graph_ = nullptr;
  context_ref ctx_;
};

//! An instantiated graph. Move-only.
class graph_exec {
 public:
  graph_exec() = default;
  graph_exec(graph_exec&& o) noexcept
      : exec_(std::exchange(o.exec_, nullptr)), ctx_(o.ctx_), kernel_nodes_(std::move(o.kernel_nodes_)) {}
  graph_exec& operator=(graph_exec&& o) noexcept;
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec();

  CUgraphExec get() const noexcept { return exec_; }
  //! Enqueues the whole graph on `s`. @throws cuda_error
  void launch(stream_ref s, std::source_location where = std::source_location::current()) const;
  //! Kernel nodes, in the order the driver lists them (the capture order).
  std::size_t kernel_node_count() const noexcept { return kernel_nodes_.size(); }
  //! Replaces the arguments of kernel node `node` (its index) for later launches; checked against the kernel's
  //! parameters like `cuasync::launch`. @throws cuda_error
  template <class... Args>
  void set_kernel_arguments(located_node node, const Args&... args) {
    static_assert((std::is_trivially_copyable_v<Args> && ...), "kernel arguments are copied byte for byte");
    std::array<std::size_t, sizeof...(Args)> sizes{sizeof(Args)...};
    std::array<void*, sizeof...(Args) + 1> params{const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    set_kernel_params(node.index, params.data(), sizes.data(), sizes.size(), node.where);
  }

 private:
  friend class graph;
  void set_kernel_params(std::size_t index, void** params, const std::size_t* sizes, std::size_t count,
                         std::source_location where);
  CUgraphExec exec_ = nullptr;
  context_ref ctx_;
  std::vector<CUgraphNode> kernel_nodes_;
};

}  // namespace cuasync::runtime
