#include <cuasync/collectives/collective_completion.hpp>
#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <chrono>

namespace cuasync::collectives {

namespace {

// One wait: the event after the collective, its fault domain, when it started (for the timeout).
struct collective_wait {
  pooled_event event;
  std::shared_ptr<detail::clique> clique;
  int index = 0;
  std::chrono::steady_clock::time_point started;
};

poll_result domain_failure(const detail::clique& c) {
  return {poll_status::failed, c.error(), failure_scope::group};
}

}  // namespace

collective_completion_source& collective_completion_source::instance() {
  static collective_completion_source source;
  return source;
}

wait_target collective_completion_source::record(const communicator& c, stream_ref s, std::shared_ptr<void> keep_alive,
                                                 std::source_location where) {
  constexpr const char* api = "cuasync::collectives::collective_completion_source::record";
  if (!c) cuasync::detail::throw_invalid(api, "empty communicator", where);
  const auto& clique = c.clique();
  if (clique->failed())
    throw collective_error(clique->error(), api, "the communicator was aborted: " + clique->detail(), where);
  const detail::clique_member& m = clique->members[c.index()];
  auto w = std::make_unique<collective_wait>();
  w->event = s.context() == context_ref(m.context) ? m.events->record(s, where)
                                                   : event_pool::for_context(s.context(), where)->record(s, where);
  w->clique = clique;
  w->index = c.index();
  w->started = std::chrono::steady_clock::now();
  wait_target t;
  t.source = this;
  // One FIFO per (stream, fault domain): handles are reused by later streams, ids are not; and a FIFO belongs to one
  // failure group, while a stream may serve two communicators.
  t.queue = static_cast<std::uintptr_t>(s.id(where) * 0x9e3779b97f4a7c15ull) ^ reinterpret_cast<std::uintptr_t>(clique.get());
  t.group = reinterpret_cast<std::uintptr_t>(clique.get());
  t.keep_alive = std::move(keep_alive);
  t.token = reinterpret_cast<std::uintptr_t>(w.release());
  return t;
}

poll_result collective_completion_source::query(std::uintptr_t token) noexcept {
  auto& w = *reinterpret_cast<collective_wait*>(token);
  detail::clique& c = *w.clique;
  if (c.failed()) return domain_failure(c);
  const poll_result r = w.event.poll();
  if (r.status == poll_status::failed) {
    std::string what;
    try {
      what = "a device error on " + c.describe(w.index) + " while a collective was awaited";
    } catch (...) {
    }
    c.fail(r.error, std::move(what));
    return domain_failure(c);
  }
  if (r.status == poll_status::ready) return r;
  if (c.poll_async_errors()) return domain_failure(c);
  if (c.options.timeout.count() > 0 && std::chrono::steady_clock::now() - w.started > c.options.timeout) {
    std::string what;
    try {
      what = "a collective on " + c.describe(w.index) + " was still pending after " +
             std::to_string(c.options.timeout.count()) + " ms (communicator_options::timeout)";
    } catch (...) {
    }
    c.fail(std::make_error_code(std::errc::timed_out), std::move(what));
    return domain_failure(c);
  }
  return r;
}

void collective_completion_source::release(std::uintptr_t token) noexcept {
  // A wait failed with its domain may still be pending on the GPU: the abort ends NCCL's kernels, and the event goes
  // back to its pool, where a later record replaces it.
  delete reinterpret_cast<collective_wait*>(token);
}

}  // namespace cuasync::collectives
