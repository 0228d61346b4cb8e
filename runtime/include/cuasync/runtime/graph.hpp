// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! CUDA graphs: capture the work a function enqueues on a stream (launches, copies, memsets) into a graph,
//! instantiate it once, relaunch it many times (one driver call per relaunch instead of one per operation), and
//! update the instantiated graph's kernel nodes in place: their arguments, their launch configuration, on or off.

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
    update_kernel_node(node.index, nullptr, params.data(), sizes.data(), sizes.size(), node.where);
  }
  //! Replaces kernel node `node`'s launch configuration (grid, block, dynamic shared memory) and its arguments for
  //! later launches, checked like `cuasync::launch`: the count and sizes against the kernel's parameters, the
  //! configuration against the kernel's and device's limits, all before the driver is asked. A node keeps the launch
  //! attributes it was captured with: `config` asking for a cluster, a cooperative launch, a priority or a dependent
  //! launch is refused. Waits for nothing; a launch of the graph already enqueued runs with the old values.
  //! @throws cuda_error
  template <class... Args>
  void set_kernel_launch(located_node node, const launch_config& config, const Args&... args) {
    static_assert((std::is_trivially_copyable_v<Args> && ...), "kernel arguments are copied byte for byte");
    std::array<std::size_t, sizeof...(Args)> sizes{sizeof(Args)...};
    std::array<void*, sizeof...(Args) + 1> params{const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    update_kernel_node(node.index, &config, params.data(), sizes.data(), sizes.size(), node.where);
  }
  //! Turns kernel node `index` off (a later launch of the graph skips it, as if it did nothing) or on again
  //! (`cuGraphNodeSetEnabled`). @throws cuda_error for an index past the kernel nodes, or the driver's error
  void set_kernel_node_enabled(std::size_t index, bool enabled,
                               std::source_location where = std::source_location::current());
  //! Whether kernel node `index` runs in later launches. @throws cuda_error (as `set_kernel_node_enabled`)
  bool kernel_node_enabled(std::size_t index, std::source_location where = std::source_location::current()) const;

 private:
  friend class graph;
  // `config` null: the arguments alone.
  void update_kernel_node(std::size_t index, const launch_config* config, void** params, const std::size_t* sizes,
                          std::size_t count, std::source_location where);
  void check_node_index(const char* api, std::size_t index, std::source_location where) const;
  CUgraphExec exec_ = nullptr;
  context_ref ctx_;
  std::vector<CUgraphNode> kernel_nodes_;
};

}  // namespace cuasync::runtime
