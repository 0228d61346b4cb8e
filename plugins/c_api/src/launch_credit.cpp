// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A stream's admission credit for operations without a completion (objects.hpp, stream_object::enqueue_unreported):
// taken in one engine call, used by a count, given back in batches after an event or at once when unused.
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include <cstdlib>

namespace cuasync::c_api {

namespace {
// The places of a batch of launches made without a completion, held until the event recorded after the last of them
// completes (that event carries one place itself); then given back together.
struct places_back final : completion_callback {
  admission_ticket places;
  void complete(std::error_code) noexcept override { delete this; }
};
}  // namespace

void stream_object::give_back_after(admission_ticket batch) const {
  if (!batch) return;
  admission_ticket last = batch.count() > 1 ? batch.split(1) : std::move(batch);
  auto* c = new places_back;
  c->places = std::move(batch);
  try {
    completion_callbacks::instance().wait(cuda_completion_source::instance().record_wait(ref, std::move(last)), c);
  } catch (...) {
    delete c;  // the record failed after waiting for the stream (event_pool::record): the places may come back now
    throw;
  }
}

std::uint32_t stream_object::unreported_batch() noexcept {
  // A larger credit spreads the batch's event record and engine hand-over over more launches: on the H100 32 made the
  // launch alone 1.068x / 1.065x `cuasync::launch` where 16 made it 1.091x / 1.111x (runs alternated, session 22). A
  // stream admits 64 at most, and the unused part of a credit is given back as soon as anyone waits.
  static const std::uint32_t places = [] {
    const char* text = std::getenv("CUASYNC_C_ABI_LAUNCH_CREDIT");
    const long n = text ? std::strtol(text, nullptr, 10) : 0;
    return n >= 1 && n <= 64 ? static_cast<std::uint32_t>(n) : 32u;
  }();
  return places;
}

void stream_object::refill_credit(const char* call) const {
  flush_unreported();  // a used credit's event; an unused one's places back (someone waits for admission)
  admission_ticket fresh = admit(*this, call, false, unreported_batch());
  std::lock_guard lock(unreported_mutex_);
  credit_.absorb(std::move(fresh));  // another thread may have taken one meanwhile: one credit, counted together
  credit_held_.store(true, std::memory_order_relaxed);
}

void stream_object::return_spare_credit_now() const noexcept {
  admission_ticket spare;  // given back at the end, outside the lock (it may admit waiters)
  std::lock_guard lock(unreported_mutex_);
  const std::uint32_t n = credit_.count();
  if (used_ >= n) return;
  if (used_ == 0) {
    spare = std::move(credit_);
    credit_held_.store(false, std::memory_order_relaxed);
  } else {
    spare = credit_.split(n - used_);  // never throws here: 0 < n - used_ < n
  }
}

void stream_object::flush_unreported() const {
  admission_ticket spare;
  admission_ticket used;
  {
    std::lock_guard lock(unreported_mutex_);
    if (!credit_) return;
    const std::uint32_t n = credit_.count();
    if (used_ != 0 && used_ < n) spare = credit_.split(n - used_);
    (used_ == 0 ? spare : used) = std::move(credit_);
    used_ = 0;
    credit_held_.store(false, std::memory_order_relaxed);
  }
  spare.reset();
  // A stream captured now (its operations in the capture hold no places; these are older than the capture): an event
  // recorded now would be a graph node, never queried. Its places are given back at once.
  if (!used || is_captured(*this)) return;
  give_back_after(std::move(used));
}

}  // namespace cuasync::c_api
