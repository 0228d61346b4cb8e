// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Awaited replays of the caller's CUDA graphs (ABI 1.5): one cuGraphLaunch admitted and completed like a launch, so
// that a framework that captured its step as a graph learns of each replay's end (and its fault) on its queue.
#include "calls.hpp"
#include "objects.hpp"
#include "tracked_enqueue.hpp"

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/engine/work_key.hpp>

#include <source_location>

namespace cuasync::c_api {

namespace {
void launch_graph_raw(const stream_object& s, CUgraphExec exec) {
  scoped_context guard(s.ref.context().get());
  if (CUresult r = detail::driver().cuGraphLaunch(exec, s.ref.get()); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuGraphLaunch", "graph exec " + detail::handle_string(exec) + " on " + s.ref.describe(),
                     std::source_location::current());
}
}  // namespace

cuasync_error* graph_launch(cuasync_graph_launch_args* a) noexcept {
  return call("graph_launch", a, [](args<cuasync_graph_launch_args>& x) {
    auto s = stream_of(x->stream, "stream");
    if (!x->graph_exec)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "graph_launch: graph_exec is NULL (instantiate the graph first: "
                                           "cuGraphInstantiate)");
    const auto exec = static_cast<CUgraphExec>(x->graph_exec);
    enqueue_tracked(*s, "graph_launch", x->completion, make_delivery(x->completion, "graph_launch"),
                    graph_work_key(exec), [&] { launch_graph_raw(*s, exec); });
  });
}

}  // namespace cuasync::c_api
