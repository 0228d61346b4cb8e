// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// async_launch_graph's checks at the call (async_graph.hpp): what can be refused before anything is admitted.
#include <cuasync/async_io/async_graph.hpp>

namespace cuasync::detail {

void check_graph_replay(const runtime::graph_exec& exec, stream_ref s, std::source_location where) {
  constexpr const char* api = "cuasync::async_launch_graph";
  if (!exec.get()) throw_invalid(api, "the graph_exec is empty (moved from, or never instantiated)", where);
  if (!s) throw_invalid(api, "empty stream", where);
}

}  // namespace cuasync::detail
