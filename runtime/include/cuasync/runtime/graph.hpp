// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! CUDA graphs: capture the work a function enqueues on a stream (launches, copies, memsets) into a graph, or build
//! one piece by piece with conditional nodes (an if whose body runs when a kernel said so, a while whose body runs
//! until a kernel says stop: `cudaGraphSetConditional` in device code); instantiate it once, relaunch it many times
//! (one driver call per relaunch instead of one per operation), and update the instantiated graph's kernel and memset
//! nodes in place: their arguments, their launch configuration, on or off.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuasync::runtime {

class graph_exec;

//! A kernel or memset node's index and the caller's source location: `graph_exec::set_kernel_arguments` takes its
//! index as this, because its last parameters are variadic (as launches take a `located_stream`).
struct located_node {
  std::size_t index;
  std::source_location where;
  located_node(std::size_t i, std::source_location w = std::source_location::current()) noexcept
      : index(i), where(w) {}
};

//! A conditional node's handle: the 64-bit value device code passes to `cudaGraphSetConditional(handle, value)` to
//! say whether an if node's body runs, or whether a while node's body runs again. Made by `graph::create_conditional`;
//! a kernel takes it as a `cudaGraphConditionalHandle` (`unsigned long long`) parameter, so it is passed to
//! `cuasync::launch` like any argument (8 bytes, checked as such). JIT programs declare the device function with
//! `jit::program::add_graph_conditional_header()`.
struct conditional_handle {
  CUgraphConditionalHandle value = 0;
  friend bool operator==(conditional_handle, conditional_handle) = default;
};
static_assert(sizeof(conditional_handle) == sizeof(CUgraphConditionalHandle) &&
              std::is_trivially_copyable_v<conditional_handle>);

//! A graph being built: a whole graph (`graph`) or the body of one of its conditional nodes (handed to the function
//! that builds it). Each piece added runs after every piece added before it. Not copyable; a body's builder lives
//! only as long as the call that builds it.
class graph_builder {
 public:
  graph_builder(const graph_builder&) = delete;
  graph_builder& operator=(const graph_builder&) = delete;

  //! The graph, or body graph, being built (the driver's handle; still owned by the `graph`).
  CUgraph get() const noexcept { return graph_; }
  //! Captures everything `enqueue(s)` enqueues on `s` into this graph, after what was added before
  //! (`cuStreamBeginCaptureToGraph`, thread-local mode). Nothing runs. `s` must belong to the graph's context. If
  //! `enqueue` throws, the capture is ended and the exception propagates (what it had captured stays in the graph:
  //! discard the graph). @throws cuda_error (e.g. an operation that cannot be captured)
  template <class F>
  graph_builder& append(stream_ref s, F&& enqueue, std::source_location where = std::source_location::current()) {
    begin_append(s, where);
    try {
      std::forward<F>(enqueue)(s);
    } catch (...) {
      abandon_append(s);
      throw;
    }
    end_append(s, where);
    return *this;
  }
  //! Adds a while node after what was added before: at each launch of the graph its body runs again and again while
  //! `h`'s value is nonzero, checked before each run (so it may run zero times). `build(graph_builder& body)` fills
  //! the body (with `body.append`, or nested conditional nodes); a kernel in it sets the value for the next check.
  //! A body may hold kernels, memsets, copies and conditional nodes only (no host functions, event records or waits,
  //! stream memory operations, allocations): anything else is refused, naming the node. If `build` throws, or the
  //! body is refused, the node stays in the graph with what was built of its body: discard the graph.
  //! @throws cuda_error for a handle of another graph, a body of the wrong kind, or the driver's error
  template <class F>
  graph_builder& add_while(conditional_handle h, F&& build,
                           std::source_location where = std::source_location::current()) {
    return add_one_body(h, CU_GRAPH_COND_TYPE_WHILE, "cuasync::runtime::graph_builder::add_while",
                        std::forward<F>(build), where);
  }
  //! Adds an if node: its body (filled by `build`, as for `add_while`) runs once when `h`'s value is nonzero as the
  //! node is reached. @throws as `add_while`
  template <class F>
  graph_builder& add_if(conditional_handle h, F&& build,
                        std::source_location where = std::source_location::current()) {
    return add_one_body(h, CU_GRAPH_COND_TYPE_IF, "cuasync::runtime::graph_builder::add_if", std::forward<F>(build),
                        where);
  }
  //! Adds an if node with an else: `then_build`'s body runs when `h`'s value is nonzero, `else_build`'s when it is 0.
  //! @throws as `add_while`
  template <class F, class G>
  graph_builder& add_if_else(conditional_handle h, F&& then_build, G&& else_build,
                             std::source_location where = std::source_location::current()) {
    conditional_bodies b =
        add_conditional_node(h, CU_GRAPH_COND_TYPE_IF, 2, "cuasync::runtime::graph_builder::add_if_else", where);
    build_body(b, 0, std::forward<F>(then_build), where);
    build_body(b, 1, std::forward<G>(else_build), where);
    return *this;
  }

 protected:
  // The handles made for a whole graph, shared with its bodies' builders (a handle is usable at any depth).
  struct handle_record {
    CUgraphConditionalHandle value;
    bool used;
  };
  using handle_list = std::vector<handle_record>;
  graph_builder() = default;
  graph_builder(CUgraph g, context_ref ctx, std::shared_ptr<handle_list> handles)
      : graph_(g), ctx_(ctx), handles_(std::move(handles)) {}
  graph_builder(graph_builder&& o) noexcept
      : graph_(std::exchange(o.graph_, nullptr)), ctx_(o.ctx_), handles_(std::move(o.handles_)),
        tail_(std::move(o.tail_)), buildable_(std::exchange(o.buildable_, false)) {}
  void take(graph_builder&& o) noexcept;
  // Refuses a moved-from graph, or a captured one (which has no known tail to add pieces after).
  void check_buildable(const char* api, std::source_location where) const;

  CUgraph graph_ = nullptr;
  context_ref ctx_;
  std::shared_ptr<handle_list> handles_;  // null: a captured graph, which takes no more pieces
  std::vector<CUgraphNode> tail_;         // what the next piece depends on
  bool buildable_ = false;

 private:
  struct conditional_bodies {
    CUgraph body[2];
    CUgraphNode node;
    const char* api;
  };
  conditional_bodies add_conditional_node(conditional_handle h, CUgraphConditionalNodeType type, unsigned size,
                                     const char* api, std::source_location where);
  template <class F>
  graph_builder& add_one_body(conditional_handle h, CUgraphConditionalNodeType type, const char* api, F&& build,
                              std::source_location where) {
    conditional_bodies b = add_conditional_node(h, type, 1, api, where);
    build_body(b, 0, std::forward<F>(build), where);
    return *this;
  }
  template <class F>
  void build_body(const conditional_bodies& b, unsigned i, F&& build, std::source_location where) {
    graph_builder body(b.body[i], ctx_, handles_);
    body.buildable_ = true;
    std::forward<F>(build)(body);
    check_body(b, i, where);
  }
  void check_body(const conditional_bodies& b, unsigned i, std::source_location where) const;
  void begin_append(stream_ref s, std::source_location where);
  void abandon_append(stream_ref s) noexcept;
  void end_append(stream_ref s, std::source_location where);
};

//! A graph: captured from a stream (`capture`), or built (`create`, then `append` and conditional nodes). Move-only.
class graph : public graph_builder {
 public:
  graph() = default;
  //! Captures everything `enqueue(s)` enqueues on `s` (thread-local capture mode: other threads' CUDA calls are not
  //! affected). Nothing runs during capture. If `enqueue` throws, the capture is ended and discarded and the
  //! exception propagates. A captured graph takes no more pieces (`append` and the conditional nodes refuse it):
  //! build one with `create` for that. @throws cuda_error (e.g. an operation that cannot be captured)
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
  //! An empty graph of context `ctx`, to build with `append` and conditional nodes (`cuGraphCreate`).
  //! @throws cuda_error
  static graph create(context_ref ctx, std::source_location where = std::source_location::current());
  graph(graph&& o) noexcept : graph_builder(std::move(o)) {}
  graph& operator=(graph&& o) noexcept;
  ~graph();

  //! A handle for this graph's conditional nodes (at any depth of bodies), whose value is `default_value` at the
  //! start of every launch until device code sets it (`cuGraphConditionalHandleCreate` with
  //! `CU_GRAPH_COND_ASSIGN_DEFAULT`). Every handle must be used by a conditional node before `instantiate`.
  //! @throws cuda_error (a captured graph, or the driver's error)
  conditional_handle create_conditional(unsigned default_value = 0,
                                        std::source_location where = std::source_location::current());
  //! Number of nodes (operations) captured or added at the top level (a conditional node counts one).
  std::size_t node_count(std::source_location where = std::source_location::current()) const;
  //! Instantiates the graph for launching. @throws cuda_error (a handle no conditional node uses, or the driver's)
  graph_exec instantiate(std::source_location where = std::source_location::current()) const;

 private:
  static void begin_capture(stream_ref s, std::source_location where);
  static void abandon_capture(stream_ref s) noexcept;
  static graph end_capture(stream_ref s, std::source_location where);
  void destroy() noexcept;
};

//! An instantiated graph. Move-only.
class graph_exec {
 public:
  graph_exec() = default;
  graph_exec(graph_exec&& o) noexcept
      : exec_(std::exchange(o.exec_, nullptr)), ctx_(o.ctx_), kernel_nodes_(std::move(o.kernel_nodes_)),
        memset_nodes_(std::move(o.memset_nodes_)) {}
  graph_exec& operator=(graph_exec&& o) noexcept;
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec();

  CUgraphExec get() const noexcept { return exec_; }
  //! Enqueues the whole graph on `s`. @throws cuda_error
  void launch(stream_ref s, std::source_location where = std::source_location::current()) const;
  //! Kernel nodes of the graph's top level (not those inside conditional bodies), in the order the driver lists them
  //! (the capture order).
  std::size_t kernel_node_count() const noexcept { return kernel_nodes_.size(); }
  //! Memset nodes of the graph's top level, in the order the driver lists them.
  std::size_t memset_node_count() const noexcept { return memset_nodes_.size(); }
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
  //! Points memset node `node` (its index) at `dst` and sets its value for later launches
  //! (`cuGraphExecMemsetNodeSetParams`), checked first: `T` is the element the node was captured with (`std::uint8_t`
  //! from `memset_async`, `std::uint32_t` from `memset32_async`), `dst` has the node's size and is aligned to its
  //! element (the driver changes the address and value of a one-dimensional memset, not its shape: recapture for
  //! that). Waits for nothing; a launch already enqueued runs with the old values. @throws cuda_error
  template <class T>
  void set_memset(located_node node, device_span dst, T value) {
    static_assert(std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t> ||
                      std::is_same_v<T, std::uint32_t>,
                  "a memset sets 1-, 2- or 4-byte elements: pass std::uint8_t, std::uint16_t or std::uint32_t");
    update_memset_node(node.index, dst, static_cast<std::uint32_t>(value), sizeof(T), node.where);
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
  void update_memset_node(std::size_t index, device_span dst, std::uint32_t value, unsigned element_size,
                          std::source_location where);
  void check_node_index(const char* api, const char* kind, std::size_t index, std::size_t count,
                        std::source_location where) const;
  CUgraphExec exec_ = nullptr;
  context_ref ctx_;
  std::vector<CUgraphNode> kernel_nodes_;
  std::vector<CUgraphNode> memset_nodes_;
};

}  // namespace cuasync::runtime
