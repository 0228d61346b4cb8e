// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/collective_completion.hpp>
#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <chrono>
#include <vector>

namespace cuasync::collectives {

namespace {

// One rank's event after its part of the collective.
struct part_wait {
  pooled_event event;
  int index = 0;  // the member of the fault domain
  bool done = false;
};

// One wait: every part's event, their fault domain, when it started (for the timeout).
struct collective_wait {
  std::vector<part_wait> parts;
  std::shared_ptr<detail::clique> clique;
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
  const rank_part part{c, s};
  return record(std::span<const rank_part>(&part, 1), std::move(keep_alive), where);
}

wait_target collective_completion_source::record(std::span<const rank_part> parts, std::shared_ptr<void> keep_alive,
                                                 std::source_location where) {
  constexpr const char* api = "cuasync::collectives::collective_completion_source::record";
  if (parts.empty()) cuasync::detail::throw_invalid(api, "no rank parts to wait for", where);
  for (const rank_part& p : parts) {
    if (!p.comm) cuasync::detail::throw_invalid(api, "empty communicator", where);
    if (!p.stream) cuasync::detail::throw_invalid(api, "no stream for " + p.comm.describe(), where);
    // The collective was enqueued on a stream of the rank's primary context (collective_ops.cpp refuses others): a
    // stream elsewhere never carries it, and its event would say nothing about it.
    const context_ref ctx = p.stream.context();
    if (ctx.device_ordinal() != p.comm.device())
      cuasync::detail::throw_invalid(api, "the stream is on device " + std::to_string(ctx.device_ordinal()) +
                                              ", the communicator (" + p.comm.describe() + ") on device " +
                                              std::to_string(p.comm.device()),
                                     where);
    if (!(ctx == p.comm.context()))
      cuasync::detail::throw_invalid(api,
                                     "the stream is on another context of device " + std::to_string(p.comm.device()) +
                                         " than its primary context, which NCCL uses",
                                     where);
  }
  const auto& clique = parts.front().comm.clique();
  for (const rank_part& p : parts)
    if (p.comm.clique() != clique)
      cuasync::detail::throw_invalid(api,
                                     p.comm.describe() + " and " + parts.front().comm.describe() +
                                         " are not one fault domain (made by one init_all): await them separately",
                                     where);
  if (clique->failed())
    throw collective_error(clique->error(), api, "the communicator was aborted: " + clique->detail(), where);
  auto w = std::make_unique<collective_wait>();
  w->parts.reserve(parts.size());
  // One FIFO per (streams, fault domain): handles are reused by later streams, ids are not; and a FIFO belongs to one
  // failure group, while a stream may serve two communicators.
  std::uintptr_t queue = reinterpret_cast<std::uintptr_t>(clique.get());
  for (const rank_part& p : parts) {
    const detail::clique_member& m = clique->members[p.comm.index()];
    part_wait pw;
    pw.event = m.events->record(p.stream, where);
    pw.index = p.comm.index();
    w->parts.push_back(std::move(pw));
    queue = (queue * 31) ^ static_cast<std::uintptr_t>(p.stream.id(where) * 0x9e3779b97f4a7c15ull);
  }
  w->clique = clique;
  w->started = std::chrono::steady_clock::now();
  wait_target t;
  t.source = this;
  t.queue = queue;
  t.group = reinterpret_cast<std::uintptr_t>(clique.get());
  t.keep_alive = std::move(keep_alive);
  t.token = reinterpret_cast<std::uintptr_t>(w.release());
  return t;
}

poll_result collective_completion_source::query(std::uintptr_t token) noexcept {
  auto& w = *reinterpret_cast<collective_wait*>(token);
  detail::clique& c = *w.clique;
  if (c.failed()) return domain_failure(c);
  poll_result r{poll_status::ready, {}};
  for (part_wait& p : w.parts) {
    if (p.done) continue;
    const poll_result pr = p.event.poll();
    if (pr.status == poll_status::failed) {
      std::string what;
      try {
        what = "a device error on " + c.describe(p.index) + " while a collective was awaited";
      } catch (...) {
      }
      c.fail(pr.error, std::move(what));
      return domain_failure(c);
    }
    if (pr.status == poll_status::ready)
      p.done = true;
    else
      r = pr;  // and go on: a rank waiting for a faulted peer stays pending, the fault shows in the peer's event
  }
  if (r.status == poll_status::ready) return r;
  if (c.poll_async_errors()) return domain_failure(c);
  if (c.options.timeout.count() > 0 && std::chrono::steady_clock::now() - w.started > c.options.timeout) {
    std::string what;
    try {
      what = "a collective on " + c.describe(w.parts.front().index) + " was still pending after " +
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
  // back to its pool, where a later record replaces it. Called on the poller, before the waiters are completed: a
  // wait that held the domain's last reference hands its teardown (waiting for NCCL) to a thread of its own.
  detail::teardown_elsewhere not_here;
  delete reinterpret_cast<collective_wait*>(token);
}

}  // namespace cuasync::collectives
