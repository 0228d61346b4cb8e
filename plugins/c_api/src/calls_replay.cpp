// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Replays of the caller's graphs, awaited (ABI 1.6): a replay anchor marked in the caller's capture
// (engine/replay_anchor.hpp), whose generations complete to the caller's queue like GPU work.
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/context.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/replay_anchor.hpp>

#include <chrono>

namespace cuasync::c_api {

namespace {
struct anchor_object {
  replay_anchor anchor;
};

// A generation's completion on its way to a queue: the engine calls it once, then it deletes itself.
struct generation_reached final : completion_callback {
  delivery to;
  void complete(std::error_code ec) noexcept override {
    to(ec);
    delete this;
  }
};
}  // namespace

cuasync_error* replay_anchor_mark(cuasync_replay_anchor_mark_args* a) noexcept {
  return call("replay_anchor_mark", a, [](args<cuasync_replay_anchor_mark_args>& x) {
    auto s = stream_of(x->stream, "stream");
    replay_anchor::options opts;
    if (x->fault_check_ns != 0) opts.fault_check = std::chrono::nanoseconds(x->fault_check_ns);
    auto o = std::make_shared<anchor_object>();
    o->anchor = replay_anchor::mark(s->ref, opts);
    x->anchor = to_handle<cuasync_replay_anchor>(registry::instance().add(kind::replay_anchor, std::move(o)));
  });
}

cuasync_error* replay_anchor_wait(cuasync_replay_anchor_wait_args* a) noexcept {
  return call("replay_anchor_wait", a, [](args<cuasync_replay_anchor_wait_args>& x) {
    auto o = registry::instance().get<anchor_object>(x->anchor, kind::replay_anchor, "anchor");
    delivery to = make_delivery(x->completion, "replay_anchor_wait");
    x->reached = o->anchor.generation();
    if (x->generation == 0) x->generation = x->reached + 1;
    if (!to) return;  // a query of the count
    auto* c = new generation_reached;
    c->to = std::move(to);
    try {
      completion_callbacks::instance().wait(o->anchor.target(x->generation), c);
    } catch (...) {
      delete c;
      throw;
    }
  });
}

cuasync_error* replay_anchor_destroy(cuasync_replay_anchor_destroy_args* a) noexcept {
  return call("replay_anchor_destroy", a, [](args<cuasync_replay_anchor_destroy_args>& x) {
    registry::instance().take<anchor_object>(x->anchor, kind::replay_anchor, "anchor");
  });
}

}  // namespace cuasync::c_api
