// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Completion queues and host tokens.
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/host_completion_source.hpp>

#include <cstring>
#include <optional>
#include <string>

namespace cuasync::c_api {

namespace {
// Host tokens complete through the engine like GPU work: the poller sees them done and delivers them.
host_completion_source& host_source() {
  static host_completion_source* s = new host_completion_source(false);  // never destroyed: the poller may outlive statics
  return *s;
}

struct host_token_object final : completion_callback {
  std::uintptr_t token = 0;
  delivery to;
  std::shared_ptr<host_token_object> self;  // alive until the engine has completed it
  void complete(std::error_code ec) noexcept override {
    to(ec);
    auto keep = std::move(self);
  }
};
}  // namespace

cuasync_error* queue_create(cuasync_queue_create_args* a) noexcept {
  return call("queue_create", a, [](args<cuasync_queue_create_args>& x) {
    x->queue = to_handle<cuasync_queue>(registry::instance().add(kind::queue, completion_queue::create(x->flags)));
  });
}

cuasync_error* queue_destroy(cuasync_queue_destroy_args* a) noexcept {
  return call("queue_destroy", a, [](args<cuasync_queue_destroy_args>& x) {
    registry::instance().take<completion_queue>(x->queue, kind::queue, "queue")->close();
  });
}

cuasync_error* queue_fd(cuasync_queue_fd_args* a) noexcept {
  return call("queue_fd", a, [](args<cuasync_queue_fd_args>& x) {
    auto q = registry::instance().get<completion_queue>(x->queue, kind::queue, "queue");
    if (!q->has_fd()) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "queue_fd: the queue was created without CUASYNC_QUEUE_FD");
    x->fd = q->hand_out_fd();
  });
}

namespace {
// queue_poll's look: the engine's pass on this thread, when no other is running. The pass may query events: in relaxed
// capture mode, so that it cannot invalidate another thread's global-mode capture (torch.cuda.graph). Without a driver
// loaded only host tokens are pending. A thread whose mode cannot be set makes no pass (the poller thread's remain):
// the look is an optimisation, never the call's failure.
void look_for_completions() {
  std::optional<thread_capture_mode> relaxed;
  if (detail::driver_if_loaded()) {
    try {
      relaxed.emplace(CU_STREAM_CAPTURE_MODE_RELAXED);
    } catch (const cuda_error&) {
      return;
    }
  }
  completion_callbacks::instance().try_poll_once();
}

// queue_drain and queue_poll: the queue and the records checked, then (`look`) a pass on this thread, then the drain.
void drain_into(args<cuasync_queue_drain_args>& x, const char* call, bool look) {
  auto q = registry::instance().get<completion_queue>(x->queue, kind::queue, "queue");
  if (!q->has_fd())
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": the queue was created without CUASYNC_QUEUE_FD");
  if (!x->records && x->capacity) fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": records is NULL");
  if (look) {
    completion_queue::draining_here here(q.get());  // what this pass delivers to q is taken below: no eventfd write
    look_for_completions();
  }
  x->count = q->drain(x->records, x->capacity);
}
}  // namespace

cuasync_error* queue_drain(cuasync_queue_drain_args* a) noexcept {
  return call("queue_drain", a, [](args<cuasync_queue_drain_args>& x) { drain_into(x, "queue_drain", false); });
}

cuasync_error* queue_poll(cuasync_queue_drain_args* a) noexcept {
  return call("queue_poll", a, [](args<cuasync_queue_drain_args>& x) { drain_into(x, "queue_poll", true); });
}

cuasync_error* host_token_create(cuasync_host_token_create_args* a) noexcept {
  return call("host_token_create", a, [](args<cuasync_host_token_create_args>& x) {
    auto t = std::make_shared<host_token_object>();
    t->to = make_delivery(x->completion, "host_token_create");
    t->token = host_source().create();
    t->self = t;
    try {
      x->token = to_handle<cuasync_host_token>(registry::instance().add(kind::host_token, t));
    } catch (...) {
      host_source().release(t->token);
      t->self.reset();
      throw;
    }
    // Its own FIFO (the token's value is unique): host tokens complete in any order.
    completion_callbacks::instance().wait({&host_source(), t->token, 0, t->token, nullptr, 0}, t.get());
  });
}

cuasync_error* host_token_complete(cuasync_host_token_complete_args* a) noexcept {
  return call("host_token_complete", a, [](args<cuasync_host_token_complete_args>& x) {
    // A code the waiter could not make sense of is refused, and the token stays to be completed properly.
    // The bytes the caller's C wrote: an enum lvalue outside its enumerators' range may not even be loaded in C++.
    int code = 0;
    static_assert(sizeof code == sizeof x->code);
    std::memcpy(&code, &x->code, sizeof code);
    if (code < CUASYNC_OK || code > CUASYNC_ERROR_BUSY)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           "host_token_complete: code " + std::to_string(code) + " is not a cuasync_error_code");
    auto t = registry::instance().take<host_token_object>(x->token, kind::host_token, "token");
    const std::error_code ec = code == CUASYNC_OK ? std::error_code() : std::error_code(code, abi_category());
    host_source().complete(t->token, ec);
  });
}

}  // namespace cuasync::c_api
