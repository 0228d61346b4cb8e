// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/detail/pass_scratch.hpp>

#include <cerrno>

namespace cuasync {

namespace {
std::error_code aborted() noexcept { return {ECANCELED, std::system_category()}; }

}  // namespace

completion_callbacks& completion_callbacks::instance() {
  // Never destroyed (the poller may outlive statics); held through a static pointer, so leak checkers see it reachable.
  static std::shared_ptr<completion_callbacks>* held =
      new std::shared_ptr<completion_callbacks>(new completion_callbacks(poll_policy::from_environment()));
  return **held;
}

std::shared_ptr<completion_callbacks> completion_callbacks::create(poll_policy policy) {
  return std::shared_ptr<completion_callbacks>(new completion_callbacks(policy));
}

void completion_callbacks::wait(wait_target t, completion_callback* cb) {
  if (!queues_.add(std::move(t), cb)) {
    queues_.count_aborted();
    cb->complete(aborted());
    return;
  }
  if (!registered_.exchange(true)) poller::instance().add(shared_from_this());
  poller::instance().submitted();
}

bool completion_callbacks::cancel(completion_callback* cb) noexcept {
  if (!queues_.detach(cb)) return false;
  queues_.count_aborted();
  cb->complete(aborted());
  return true;
}

std::size_t completion_callbacks::run_pass(bool full, bool if_free) {
  detail::pass_scratch scratch;
  std::vector<completed_wait>& done = scratch.get();
  if (if_free) {
    if (!queues_.try_pass(done)) return 0;
  } else {
    queues_.pass(full, done);
  }
  for (const completed_wait& d : done) static_cast<completion_callback*>(d.wait)->complete(d.error);
  return done.size();
}

std::size_t completion_callbacks::poll_once() { return run_pass(false); }

std::size_t completion_callbacks::try_poll_once() { return run_pass(false, true); }

std::optional<std::chrono::nanoseconds> completion_callbacks::poller_pass() {
  if (queues_.empty()) return std::nullopt;
  run_pass(queues_.watchdog_due());
  if (queues_.empty()) return std::nullopt;
  return queues_.next_delay();
}

void completion_callbacks::shut_down() {
  for (queued_wait* w : queues_.shut_down()) {
    queues_.count_aborted();
    static_cast<completion_callback*>(w)->complete(aborted());
  }
  if (registered_.load()) poller::instance().remove(this, true);
}

}  // namespace cuasync
