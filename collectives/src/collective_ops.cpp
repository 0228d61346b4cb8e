// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/collective_ops.hpp>
#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include "collective_trace.hpp"

#include <cstdio>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>

namespace cuasync::collectives {

namespace {

thread_local int open_groups = 0;

std::string bytes(std::size_t n) { return std::to_string(n) + " B"; }

// Checks the element type and a buffer's size; returns its element count.
std::size_t count_of(const char* api, const char* which, const collective_buffer& b, data_type t,
                     std::source_location where) {
  const std::size_t e = element_size(t);
  if (e == 0) cuasync::detail::throw_invalid(api, "unknown data type " + std::to_string(static_cast<int>(t)), where);
  if (!b.span.ptr && b.span.size) cuasync::detail::throw_invalid(api, std::string(which) + " is null", where);
  if (b.span.size % e)
    cuasync::detail::throw_invalid(api, std::string(which) + " (" + bytes(b.span.size) + ") is not a whole number of " +
                                            std::to_string(e) + "-byte elements",
                                   where);
  return b.span.size / e;
}

void check_op(const char* api, reduce_op op, std::source_location where) {
  switch (op) {
    case reduce_op::sum: case reduce_op::prod: case reduce_op::max: case reduce_op::min: case reduce_op::avg: return;
  }
  // NCCL would refuse it only when enqueued, which aborts the whole fault domain (issue below).
  cuasync::detail::throw_invalid(api, "unknown reduce op " + std::to_string(static_cast<int>(op)), where);
}

void require_size(const char* api, const char* what, std::size_t got, std::size_t want, std::source_location where) {
  if (got != want)
    cuasync::detail::throw_invalid(api, std::string(what) + " is " + bytes(got) + ", expected " + bytes(want), where);
}

// The communicator is usable on `s`: not empty, not aborted, and `s` is on its device.
const detail::clique_member& member_on(const char* api, const communicator& c, stream_ref s,
                                       std::source_location where) {
  if (!c) cuasync::detail::throw_invalid(api, "empty communicator", where);
  if (!s) cuasync::detail::throw_invalid(api, "no stream (the legacy default stream is never used implicitly)", where);
  const detail::clique_member& m = c.clique()->members[c.index()];
  if (s.context().device_ordinal() != m.device)
    cuasync::detail::throw_invalid(api, "the stream is on device " + std::to_string(s.context().device_ordinal()) +
                                            ", the communicator (" + c.describe() + ") on device " +
                                            std::to_string(m.device),
                                   where);
  if (!(s.context() == context_ref(m.context)))
    cuasync::detail::throw_invalid(api, "the stream is on another context of device " + std::to_string(m.device) +
                                            " than its primary context, which NCCL uses",
                                   where);
  if (c.clique()->failed())
    throw collective_error(c.clique()->error(), api, "the communicator was aborted: " + c.clique()->detail(), where);
  return m;
}

void declare(const collective_buffer& b, stream_ref s, runtime::access a, std::source_location where) {
  if (b.tracked) b.tracked->use(s, a, where);
}

void declare_pair(const collective_buffer& send, const collective_buffer& recv, stream_ref s,
                  std::source_location where) {
  if (send.tracked == recv.tracked) {
    declare(recv, s, runtime::access::read_write, where);
    return;
  }
  declare(send, s, runtime::access::read, where);
  declare(recv, s, runtime::access::write, where);
}

void check_rank(const char* api, const char* what, int r, const communicator& c, std::source_location where) {
  if (r < 0 || r >= c.size())
    cuasync::detail::throw_invalid(api, std::string(what) + " " + std::to_string(r) + " outside [0, " +
                                            std::to_string(c.size()) + ")",
                                   where);
}

// Makes the NCCL call `call` that uses c's communicator. An abort (ncclCommAbort frees the communicators) waits for
// it: the domain is held around it, or, inside a group, from now until the outermost group ends (NCCL keeps the
// queued call on the communicator until then). Aborted since member_on looked: refused like there.
// NCCL refused to enqueue: the other ranks' parts may already be issued and would wait for this one forever, so
// the fault domain is aborted before the error is thrown (inside a group, once the group has ended: fail defers it).
// `what` describes the call (built only when it failed).
template <class Call, class What>
void issue(const char* api, const communicator& c, detail::traced_collective& traced, const char* nccl_api,
           Call&& call, What&& what, std::source_location where) {
  detail::clique& domain = *c.clique();
  const bool grouped = group::depth() > 0;
  int r = 0;
  {
    std::shared_lock<std::shared_mutex> held;
    if (grouped)
      detail::note_grouped(c.clique());
    else
      held = domain.hold_comms();
    if (domain.failed())
      throw collective_error(domain.error(), api, "the communicator was aborted: " + domain.detail(), where);
    r = call();
  }
  if (r == 0) [[likely]] {
    traced.issued(grouped);
    return;
  }
  const std::string w = what();
  domain.fail(make_nccl_error_code(r), std::string(nccl_api) + " failed on " + c.describe() + ": " + w);
  detail::throw_nccl(r, nccl_api, w, where);
}

std::string concerning(const communicator& c, std::size_t count, data_type t) {
  return c.describe() + ", " + std::to_string(count) + " elements of " + std::to_string(element_size(t)) + " B";
}

}  // namespace

std::size_t element_size(data_type t) noexcept {
  switch (t) {
    case data_type::int8: case data_type::uint8: return 1;
    case data_type::float16: case data_type::bfloat16: return 2;
    case data_type::int32: case data_type::uint32: case data_type::float32: return 4;
    case data_type::int64: case data_type::uint64: case data_type::float64: return 8;
  }
  return 0;
}

void all_reduce(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, reduce_op op,
                stream_ref s, std::source_location where) {
  constexpr const char* api = "cuasync::collectives::all_reduce";
  check_op(api, op, where);
  const std::size_t n = count_of(api, "send", send, t, where);
  count_of(api, "recv", recv, t, where);
  require_size(api, "recv", recv.span.size, send.span.size, where);
  const auto& m = member_on(api, c, s, where);
  declare_pair(send, recv, s, where);
  detail::traced_collective traced(c, s, "ncclAllReduce", send.span.size);
  issue(api, c, traced, "ncclAllReduce",
        [&] {
          return detail::nccl().all_reduce(reinterpret_cast<const void*>(send.span.ptr),
                                           reinterpret_cast<void*>(recv.span.ptr), n, static_cast<int>(t),
                                           static_cast<int>(op), m.comm, s.get());
        },
        [&] { return concerning(c, n, t); }, where);
}

void broadcast(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, int root,
               stream_ref s, std::source_location where) {
  constexpr const char* api = "cuasync::collectives::broadcast";
  const std::size_t n = count_of(api, "recv", recv, t, where);
  check_rank(api, "root", root, c, where);
  if (c && c.rank() == root) {
    count_of(api, "send", send, t, where);
    require_size(api, "send", send.span.size, recv.span.size, where);
  }
  const auto& m = member_on(api, c, s, where);
  if (m.rank == root)
    declare_pair(send, recv, s, where);
  else
    declare(recv, s, runtime::access::write, where);
  detail::traced_collective traced(c, s, "ncclBroadcast", recv.span.size);
  issue(api, c, traced, "ncclBroadcast",
        [&] {
          return detail::nccl().broadcast(reinterpret_cast<const void*>(send.span.ptr),
                                          reinterpret_cast<void*>(recv.span.ptr), n, static_cast<int>(t), root, m.comm,
                                          s.get());
        },
        [&] { return concerning(c, n, t); }, where);
}

void reduce_scatter(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, reduce_op op,
                    stream_ref s, std::source_location where) {
  constexpr const char* api = "cuasync::collectives::reduce_scatter";
  check_op(api, op, where);
  count_of(api, "send", send, t, where);
  const std::size_t n = count_of(api, "recv", recv, t, where);
  if (!c) cuasync::detail::throw_invalid(api, "empty communicator", where);
  require_size(api, "send", send.span.size, recv.span.size * static_cast<std::size_t>(c.size()), where);
  const auto& m = member_on(api, c, s, where);
  declare_pair(send, recv, s, where);
  detail::traced_collective traced(c, s, "ncclReduceScatter", send.span.size);
  issue(api, c, traced, "ncclReduceScatter",
        [&] {
          return detail::nccl().reduce_scatter(reinterpret_cast<const void*>(send.span.ptr),
                                               reinterpret_cast<void*>(recv.span.ptr), n, static_cast<int>(t),
                                               static_cast<int>(op), m.comm, s.get());
        },
        [&] { return concerning(c, n, t); }, where);
}

void all_gather(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, stream_ref s,
                std::source_location where) {
  constexpr const char* api = "cuasync::collectives::all_gather";
  const std::size_t n = count_of(api, "send", send, t, where);
  count_of(api, "recv", recv, t, where);
  if (!c) cuasync::detail::throw_invalid(api, "empty communicator", where);
  require_size(api, "recv", recv.span.size, send.span.size * static_cast<std::size_t>(c.size()), where);
  const auto& m = member_on(api, c, s, where);
  declare_pair(send, recv, s, where);
  detail::traced_collective traced(c, s, "ncclAllGather", recv.span.size);
  issue(api, c, traced, "ncclAllGather",
        [&] {
          return detail::nccl().all_gather(reinterpret_cast<const void*>(send.span.ptr),
                                           reinterpret_cast<void*>(recv.span.ptr), n, static_cast<int>(t), m.comm,
                                           s.get());
        },
        [&] { return concerning(c, n, t); }, where);
}

void send(const communicator& c, collective_buffer buffer, data_type t, int peer, stream_ref s,
          std::source_location where) {
  constexpr const char* api = "cuasync::collectives::send";
  const std::size_t n = count_of(api, "buffer", buffer, t, where);
  check_rank(api, "peer", peer, c, where);
  const auto& m = member_on(api, c, s, where);
  declare(buffer, s, runtime::access::read, where);
  detail::traced_collective traced(c, s, "ncclSend", buffer.span.size);
  issue(api, c, traced, "ncclSend",
        [&] {
          return detail::nccl().send(reinterpret_cast<const void*>(buffer.span.ptr), n, static_cast<int>(t), peer,
                                     m.comm, s.get());
        },
        [&] { return concerning(c, n, t) + " to rank " + std::to_string(peer); }, where);
}

void recv(const communicator& c, collective_buffer buffer, data_type t, int peer, stream_ref s,
          std::source_location where) {
  constexpr const char* api = "cuasync::collectives::recv";
  const std::size_t n = count_of(api, "buffer", buffer, t, where);
  check_rank(api, "peer", peer, c, where);
  const auto& m = member_on(api, c, s, where);
  declare(buffer, s, runtime::access::write, where);
  detail::traced_collective traced(c, s, "ncclRecv", buffer.span.size);
  issue(api, c, traced, "ncclRecv",
        [&] {
          return detail::nccl().recv(reinterpret_cast<void*>(buffer.span.ptr), n, static_cast<int>(t), peer, m.comm,
                                     s.get());
        },
        [&] { return concerning(c, n, t) + " from rank " + std::to_string(peer); }, where);
}

group::group(std::source_location where) : owner_(std::this_thread::get_id()) {
  detail::check_nccl(detail::nccl().group_start(), "ncclGroupStart", {}, where);
  open_ = true;
  ++open_groups;
}

namespace {

constexpr const char* per_thread =
    "NCCL groups are per thread: this group began on another thread, whose NCCL group stays open (begin and end a "
    "group on one thread; do not co_await inside a group, a coroutine may resume on another thread)";

// Ends one group level. When the outermost ends (or NCCL failed to issue the group), the domains noted in it are
// let go, and the aborts deferred by a failure inside the group start now that NCCL has let go of their
// communicators; ncclGroupEnd's failure aborts them all (the ranks' parts that did start would wait forever).
// Returns NCCL's result, and a domain that failed while the group held it (the outermost end reports it).
std::pair<int, std::shared_ptr<detail::clique>> end_group_level() noexcept {
  int r = 0;
  {
    // The outermost end launches the group's work (and may wait for it, or for a lazy communicator setup).
    trace::host_call watched(trace::watch_only(), trace::category::collective, "ncclGroupEnd");
    r = detail::nccl().group_end();
  }
  if (r == 0 && open_groups != 0) return {r, nullptr};
  detail::end_grouped_traces(r == 0);
  std::shared_ptr<detail::clique> failed;
  for (const auto& c : detail::take_grouped()) {
    if (r != 0)
      c->fail(make_nccl_error_code(r), "ncclGroupEnd failed for a group holding " + c->describe(0) + "'s calls");
    c->start_deferred_abort();
    if (r == 0 && !failed && c->failed()) failed = c;
  }
  return {r, std::move(failed)};
}

}  // namespace

group::~group() {
  if (!open_) return;
  if (owner_ != std::this_thread::get_id()) {
    // Ending it here would end no NCCL group (or this thread's own) and unbalance both threads' depths.
    std::fprintf(stderr, "cuasync::collectives::group destroyed on another thread than it began on, left open: %s\n",
                 per_thread);
    return;
  }
  --open_groups;
  open_ = false;
  try {
    end_group_level();
  } catch (...) {
  }
}

void group::end(std::source_location where) {
  constexpr const char* api = "cuasync::collectives::group::end";
  if (!open_) cuasync::detail::throw_invalid(api, "the group has ended already", where);
  if (owner_ != std::this_thread::get_id()) cuasync::detail::throw_invalid(api, per_thread, where);
  open_ = false;
  --open_groups;
  auto [r, failed] = end_group_level();
  detail::check_nccl(r, "ncclGroupEnd", {}, where);
  // The group was issued, but a fault domain in it failed meanwhile (a call refused inside it, the application's
  // abort, a timeout): its collectives will not complete.
  if (failed)
    throw collective_error(failed->error(), "ncclGroupEnd", "the communicator was aborted: " + failed->detail(),
                           where);
}

int group::depth() noexcept { return open_groups; }

}  // namespace cuasync::collectives
