// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The state of the simulated driver (tests/fake_driver): devices, contexts, streams, events, memory, modules and
// the one work queue that a "device" thread executes in submission order. Device memory is host memory, so a device
// pointer is a host address; kernels do nothing except the few `sim_*` kernels (sim_kernels.cpp) that tests use to
// check argument passing and faults. Every object the driver hands out is counted by kind, so a test can compare
// what is still alive at the end of a run with a run that never failed.
// One exception to submission order: a gate kernel (`sim_wait_u32`) that is not open yet holds only its own stream
// (and what waits on it): the device thread runs later work of other streams meanwhile, as a GPU does behind a
// spinning kernel. Without a closed gate, work runs strictly in submission order.
// Stream capture (entry_capture.cpp): work submitted to a capturing stream becomes a node of its capture instead
// of running; an illegal call during a capture invalidates it, as the driver does (see capture_state). Conditional
// nodes (entry_conditional.cpp): built graphs whose if / while / switch nodes run their bodies by a handle's value.
#include <cuda.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace sim {

enum class kind {
  context, stream, event, device_memory, pinned_host, registered_host, managed, module, pool, library, graph,
  graph_exec, count
};
inline constexpr const char* kind_names[] = {"contexts",        "streams", "events",  "device_memory",
                                             "pinned_host",     "registered_host",   "managed", "modules",
                                             "pools",           "libraries",         "graphs",  "graph_execs"};
inline constexpr int kinds = static_cast<int>(kind::count);

struct context_state {
  int device = 0;
  bool primary = false;
  bool alive = true;
  int primary_refs = 0;
  unsigned long long id = 0;
  CUresult sticky = CUDA_SUCCESS;  // a faulted kernel (sim_trap): every later call in the context answers it
};

struct conditional_node;   // entry_conditional.cpp
struct conditional_value;
struct graph_state;
struct function_state;

// What a kernel or memset node was made from, for the calls that read and change a node (entry_graph_update.cpp).
struct kernel_node_params {
  CUfunction func = nullptr;
  std::shared_ptr<const function_state> fn;  // a copy (the module may be unloaded before the work runs)
  std::vector<unsigned char> args;
  unsigned grid[3] = {}, block[3] = {}, shared = 0;
};
struct node_params {
  std::shared_ptr<const kernel_node_params> kernel;
  std::shared_ptr<const CUDA_MEMSET_NODE_PARAMS> memset;
};

// One node of a graph: what submit() would have queued (its work, its gate, its context), in capture order.
struct graph_node {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  context_state* ctx = nullptr;
  std::function<void()> fn;
  std::function<bool()> ready;
  // An event record node (cuEventRecordWithFlags' external record): each launch records `event` anew, so that a query
  // of it answers for that launch's node (nullptr for other nodes).
  CUevent event = nullptr;
  std::shared_ptr<conditional_node> conditional;  // a conditional node: handle and bodies (`fn` made at instantiation)
  node_params params;                             // a kernel or memset node: what made `fn`
  bool enabled = true;                            // false: an instantiated graph's node turned off
};

// A capture sequence (cuStreamBeginCapture .. cuStreamEndCapture). Its nodes are kept in the order they were
// captured, a valid order of the graph's edges (every edge points from earlier to later work), which a launch
// replays one after the other on its stream. Streams join it by waiting on an event recorded in it; each must be
// joined back (waited on from another member after its last node) before the end, or the end answers UNJOINED.
struct capture_state {
  unsigned long long id = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  unsigned long long origin = 0;     // the stream that began it (its id): only it may end it
  std::uint64_t thread = 0;          // the thread that began it (a non-relaxed capture ends there)
  bool invalidated = false;          // an illegal call during it: its end answers INVALIDATED, no graph
  bool ended = false;
  std::deque<graph_node> nodes;      // deque: node handles (their addresses) stay valid
  graph_state* into = nullptr;         // cuStreamBeginCaptureToGraph: nodes go straight into that graph instead
  struct member { std::size_t nodes = 0, joined = 0; graph_node* last = nullptr; };
  std::map<unsigned long long, member> members;  // by stream id, the origin included
};

struct graph_state {
  context_state* ctx = nullptr;
  std::deque<graph_node> nodes;
  graph_state* parent = nullptr;  // a conditional node's body: the graph holding the node
  const graph_state* origin = nullptr;  // an instantiated graph: the graph it was made from (its nodes' handles)
  // Conditional handles made for it (an instantiated graph: those of its bodies too), set to their default value at
  // the start of each launch when asked to be.
  std::vector<std::shared_ptr<conditional_value>> handles;
};

struct stream_state {
  context_state* ctx = nullptr;
  std::shared_ptr<capture_state> capture;  // the capture it takes part in; null: none
  unsigned flags = 0;
  int priority = 0;
  unsigned long long id = 0;
  std::uint64_t last = 0;  // sequence number of its last queued work
};

struct event_state {
  context_state* ctx = nullptr;
  unsigned flags = 0;
  std::uint64_t seq = 0;  // the work it waits for; 0: never recorded (complete)
  double at_ms = 0;       // when that work was done (for cuEventElapsedTime)
  // Last recorded in a capture: no work to wait for, but a point of that capture (on stream `captured_on`, after
  // its first `captured_at` nodes) that a wait joins; queries and timing of it are refused (CUDA_ERROR_CAPTURED_EVENT).
  std::shared_ptr<capture_state> captured_in;
  unsigned long long captured_on = 0;
  std::size_t captured_at = 0;
};

struct param { std::size_t offset, size; };
struct function_state;
struct module_state {
  context_state* ctx = nullptr;
  std::map<std::string, std::unique_ptr<function_state>> functions;
};
struct function_state {
  module_state* module = nullptr;
  std::string name;
  std::vector<param> params;
  int max_dynamic_shared = 0;
};

// A context-independent library (cuLibraryLoadData): its PTX, parsed again into a module of each context that asks
// for one of its functions (cuKernelGetFunction), as the driver loads a library into a context lazily.
struct library_state;
struct kernel_state {
  library_state* library = nullptr;
  std::string name;
};
struct library_state {
  std::string ptx;
  std::map<std::string, std::unique_ptr<kernel_state>> kernels;          // cuLibraryGetKernel's handles
  std::map<context_state*, std::unique_ptr<module_state>> per_context;  // not live modules of their own
};

struct pool_state {
  int device = 0;
  bool is_default = false;
  std::uint64_t release_threshold = 0;
  std::uint64_t used = 0, used_high = 0;
  int attributes[16] = {};
};

struct allocation {
  kind k;
  std::size_t size;
  context_state* ctx;
  pool_state* pool;  // stream-ordered allocations
  int device;
};

// Injected failures: FAKE_CUDA_FAIL="<entry>:<n>[:<code>]" makes the n-th call of <entry> (counted from the
// moment the program starts phase 1, see control.h) answer <code> (default: CUDA_ERROR_OUT_OF_MEMORY for
// allocations, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for launches, CUDA_ERROR_UNKNOWN otherwise).
struct injection {
  std::string entry;
  long nth = 0;
  int code = 0;
  bool fired = false;
};

struct device_model {
  std::mutex m;
  std::condition_variable progress;  // work finished
  std::condition_variable work;      // work queued
  // Devices
  int device_count = 1;
  std::size_t device_memory = std::size_t{1} << 30;
  //! major * 10 + minor (FAKE_CUDA_COMPUTE_CAPABILITY): 90 unless set. One NVRTC has no CUBIN for (95) makes cuasync's
  //! JIT hand the driver PTX, which the simulated driver loads (it refuses machine code).
  int compute_capability = 90;
  std::vector<std::size_t> device_used;
  std::vector<context_state*> primary;  // one per device, created on first retain
  // Objects (handles are the addresses of these states)
  std::map<void*, std::unique_ptr<context_state>> contexts;
  std::map<void*, std::unique_ptr<stream_state>> streams;
  std::map<void*, std::unique_ptr<event_state>> events;
  std::map<void*, std::unique_ptr<module_state>> modules;
  std::map<void*, std::unique_ptr<pool_state>> pools;
  std::map<void*, std::unique_ptr<library_state>> libraries;
  std::map<void*, std::unique_ptr<graph_state>> graphs;
  std::map<void*, std::unique_ptr<graph_state>> graph_execs;  // an instantiated graph: a copy of its nodes
  std::set<capture_state*> captures;  // under way (not ended)
  std::map<std::uintptr_t, allocation> memory;  // by start address
  unsigned long long next_id = 1;
  // Work
  struct work_item {
    std::uint64_t seq;
    context_state* ctx;  // work of a context with a sticky error does not run (as on a GPU after a fault)
    std::function<void()> fn;
    unsigned long long stream = 0;  // the stream's id; 0: a default stream (ordered with all work)
    std::uint64_t after = 0;        // work that must be done first (a stream's wait on an event); 0: none
    std::function<bool()> ready;    // a gate: runs once it answers true (asked with the lock held); empty: always
  };
  std::deque<work_item> queue;  // in submission order; work runs out of it only behind a closed gate
  std::uint64_t submitted = 0;
  std::uint64_t done = 0;              // every work up to this one is done
  std::set<std::uint64_t> done_ahead;  // work past `done` that is done (it ran while a gate held earlier work)
  // Bookkeeping
  long live[kinds] = {};
  long refused[kinds] = {};  // destroy calls that an injected failure refused: the object stays
  int phase = 0;
  std::map<std::string, long> calls[3];  // per phase
  injection inject;

  device_model();
};

// The model (created on first use, never destroyed: threads of the program may call in during exit).
device_model& model();
double now_ms();

// Called first by every entry point: counts the call and answers an injected failure (CUDA_SUCCESS: go on).
CUresult enter(const char* entry, CUresult injected_default);
// Hands "[time][tid][CUDA][E][entry] text" to the callback registered with cuLogsRegisterCallback, if any, on the
// calling thread, as drivers for CUDA 12.9+ log a failed call (entry_logs.cpp). The model's lock may be held: the
// callback must not call the driver (cuasync's does not).
void log_failure(const char* entry, const char* text);
// Calls of `entry` made on the calling thread so far (fake_cuda_calls_on_this_thread).
long calls_here(const char* entry);
// For the entry points that observe the device (queries, synchronizes): a failure injected there is what a real
// driver reports there, a sticky fault of the context (CUDA_ERROR_LAUNCH_FAILED): `c` is marked with it. Lock held.
void make_sticky(context_state* c, CUresult r);

// Queues `fn` as the next work of `s` (nullptr: the default stream); returns its sequence number. Lock held.
// `after`: work that must be done before it; `ready`: a gate's condition (see work_item). On a capturing stream
// it becomes a node of type `type` of the capture instead, and answers 0 (nothing to wait for).
// `params`: what a kernel or memset node keeps of its launch.
std::uint64_t submit(device_model& d, stream_state* s, std::function<void()> fn, std::uint64_t after = 0,
                     std::function<bool()> ready = {}, CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY,
                     node_params params = {});

// ---- capture (entry_capture.cpp; lock held) ----
// Marks `c` invalidated (its end answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED).
void invalidate(capture_state& c);
// A capturing stream destroyed: its capture is invalidated, and ended when it began there (no end can come).
void abandon(device_model& d, stream_state& s);
// A "potentially unsafe" call (an allocation, an event query or synchronize: cuThreadExchangeStreamCaptureMode's
// list) made while a capture forbids it to this thread: invalidates the captures that forbid it and answers
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; CUDA_SUCCESS when none does.
CUresult unsafe_call(device_model& d);
// Work of the legacy default stream in a context where a blocking stream is capturing: invalidates those captures
// and answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; CUDA_SUCCESS when there is none.
CUresult legacy_stream_use(device_model& d, context_state* c);
// ---- conditional nodes (entry_conditional.cpp; lock held unless said) ----
// A graph (d.graphs) or a conditional node's body graph by its handle; nullptr when neither.
graph_state* find_any_graph(device_model& d, CUgraph g);
// Makes the work of `exec`'s conditional nodes from a snapshot of their bodies (later edits of the graph's bodies do
// not reach it), and collects the bodies' handles into `exec.handles`.
void instantiate_conditionals(device_model& d, graph_state& exec);
// What a launch of `exec` on `s` does first: its handles' default values, assigned in stream order.
void launch_conditionals(device_model& d, stream_state* s, const graph_state& exec);
// cudaGraphSetConditional from a simulated kernel (lock not held): CUDA_ERROR_ILLEGAL_ADDRESS for an unknown handle.
CUresult set_conditional(std::uint64_t handle, unsigned value);

// True when work `seq` is done (lock held).
bool finished(const device_model& d, std::uint64_t seq);
// Waits (lock held, released while waiting) until work `seq` is done.
void wait_done(device_model& d, std::unique_lock<std::mutex>& lock, std::uint64_t seq);
// Waits (lock held, released while waiting) until all work submitted so far is done.
void wait_all_done(device_model& d, std::unique_lock<std::mutex>& lock);

// Lookups (lock held); nullptr when the handle is not live.
context_state* current_context();
void set_current_context(context_state* c);
void push_context(context_state* c);
context_state* pop_context();
stream_state* find_stream(device_model& d, CUstream s, CUresult* r);  // default streams answer a null state
allocation* find_memory(device_model& d, std::uintptr_t p, std::uintptr_t* base = nullptr);

// The `sim_*` kernels (sim_kernels.cpp): runs `f` with its packed arguments when its work comes up; answers the
// error the kernel raises (CUDA_SUCCESS when it has none).
CUresult run_kernel(const function_state& f, const std::vector<unsigned char>& args);
// For a gate kernel, the condition its work waits for (see work_item::ready); empty for every other kernel.
std::function<bool()> kernel_gate(const function_state& f, const std::vector<unsigned char>& args);
// Parses the `.entry` declarations of a PTX text into functions; false when it has none.
bool parse_ptx(const char* text, module_state& m);

}  // namespace sim
