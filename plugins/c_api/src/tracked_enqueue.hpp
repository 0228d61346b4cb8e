// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to the C ABI: how a tracked operation that runs as one enqueue (a launch, a graph replay) is issued, after
// its arguments were checked: on a captured stream it is a node and its completion is reported at once; otherwise it
// takes a place, is enqueued, and completes when its work has (or gives its place back in a batch, without one).
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/trace/flight_recorder.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace cuasync::c_api {

//! `enqueue()` puts the work on `s` (it throws what the driver said). `work_key`: what the work is, for the engine's
//! predicted ends. @throws abi_error (BUSY: no place, nothing enqueued), cuda_error
template <class Enqueue>
void enqueue_tracked(const stream_object& s, const char* call, const cuasync_completion& c, delivery to,
                     std::uint64_t work_key, Enqueue&& enqueue) {
  if (is_captured(s)) {  // a graph node: no place, no event (an adopted or exposed stream asks the driver)
    s.return_spare_credit();  // places taken before the capture are not held through it
    enqueue();
    return complete_captured(to);
  }
  std::optional<trace::flight::awaiter_scope> awaited;  // the flight recorder names the completion awaiting it
  if (trace::flight::enabled()) [[unlikely]]
    awaited.emplace(reinterpret_cast<std::uintptr_t>(c.queue), c.token);
  if (!to) return s.enqueue_unreported(call, enqueue);  // no completion asked: a place of the stream's credit
  admission_ticket ticket = admit(s, call);
  // The work's start, at the latest (its predicted end): read only for a completion (a clock read per operation).
  const long long issued = to ? completion_queues::now_ns() : 0;
  enqueue();
  complete_after(s.ref, std::move(ticket), std::move(to), work_key, issued);
}

}  // namespace cuasync::c_api
