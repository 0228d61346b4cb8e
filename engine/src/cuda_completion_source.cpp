// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "source_state.hpp"

#include <cuasync/driver/detail/flight_hooks.hpp>
#include <cuasync/driver/error.hpp>

namespace cuasync {

namespace {
// How often a pass asks the event of a wait whose host word is still to come: a device fault (which stops the words)
// reaches its waiters within this and a pass; between, a pass over lone waits makes no driver call.
constexpr long long fault_check_period_ns = 500'000;
}  // namespace

using detail::is_special_stream;
using detail::record_shard;
using detail::stream_state;
using detail::user_event_bit;

cuda_completion_source& cuda_completion_source::instance() {
  static cuda_completion_source* s = new cuda_completion_source;  // never destroyed: pollers may outlive statics
  return *s;
}

cuda_completion_source::state& cuda_completion_source::st() const {
  static state* p = new state;
  return *p;
}

pooled_event cuda_completion_source::record(stream_ref s, std::source_location where) {
  return record(s, admission_ticket(), where);
}

pooled_event cuda_completion_source::record(stream_ref s, admission_ticket ticket, std::source_location where) {
  return record_on(s, std::move(ticket), false, where);
}

wait_target cuda_completion_source::record_wait(stream_ref s, admission_ticket ticket,
                                                std::shared_ptr<void> keep_alive, std::source_location where) {
  return record_on(s, std::move(ticket), true, where).into_target(std::move(keep_alive), where);
}

pooled_event cuda_completion_source::record_on(stream_ref s, admission_ticket ticket, bool event_hidden,
                                               std::source_location where) {
  if (!s) detail::throw_invalid("cuasync::cuda_completion_source::record", "empty stream", where);
  // The key comes from the ticket: one of another stream would join that stream's FIFO and complete with its work.
  // The handle tells (a compare; the id would cost a driver call per record). A misuse, refused like an empty stream:
  // without settling s, which may hold work that waits for the caller (a gate) or runs for long.
  if (ticket && ticket.stream_ != s.get()) [[unlikely]]
    detail::throw_invalid("cuasync::cuda_completion_source::record",
                          "the admission ticket was admitted on another stream (" +
                              detail::handle_string(ticket.stream_) + ") than the one recorded on, " + s.describe(),
                          where);
  if (ticket && ticket.count_ != 1) [[unlikely]]  // a wait gives back one place: a credit's are split off first
    detail::throw_invalid("cuasync::cuda_completion_source::record",
                          "the admission ticket holds " + std::to_string(ticket.count_) +
                              " places (a credit from try_admit_n): split one off to record with",
                          where);
  state& st = this->st();
  std::shared_ptr<event_pool> pool;
  detail::event_slot* slot = nullptr;
  try {
    // An admitted operation's ticket holds its context's pool already (and its stream's key, below).
    pool = ticket ? ticket.pool_ : event_pool::for_context(s.context(), where);
    slot = pool->acquire(where);
  } catch (...) {
    detail::settle_stream(s);  // see event_pool::record
    throw;
  }
  event_ref ev(slot->event, s.context());
  // Noted before the record or the word's write: an operation another thread enqueues meanwhile gets a later number,
  // so that this wait's completion never marks it done. Named for what is enqueued.
  trace::flight::mark flown;
  auto note = [&](const char* call) {
    if (trace::flight::enabled()) [[unlikely]]
      flown = detail::flight_note(s, {.call = call, .name = {}, .stable_name = "completion event", .where = where});
  };
  std::uint64_t order = 0;
  std::uintptr_t queue_key = reinterpret_cast<std::uintptr_t>(s.get());
  try {
    if (is_special_stream(s.get())) {
      note("cuEventRecord");
      ev.record(s, where);
    } else {
      const std::uint64_t id = ticket ? ticket.stream_key_ : s.id(where);
      // Top bit set: never equal to a handle (the special streams are the small values 0x1 and 0x2).
      queue_key = static_cast<std::uintptr_t>(id) | (std::uintptr_t{1} << 63);
      record_shard& shard = st.shard(id);
      std::lock_guard lock(shard.mutex);
      stream_state& stream = shard.streams[id];
      // A wait alone on its stream gets a host word too: seeing it done is then a memory read, where a query of a
      // finished event costs ~1.3 µs (the word's write costs ~0.7 µs more to enqueue than the event alone). Waits
      // that others join before they complete need none (one query of the newest completes them all), so the word
      // is given only while the stream's last lone wait stayed alone (one stream, many in flight: no words).
      const bool first = stream.outstanding == 0;
      const bool word = first && stream.words && slot->word && st.host_words.load(std::memory_order_relaxed);
      // Words alone: the word tells done; a fault reaches the wait through a query of the slot's event, which a
      // faulted context answers with its error whether that event was recorded or not (the completion probe's
      // part 8 on an H100: every query in a faulted context answers CUDA_ERROR_LAUNCH_FAILED).
      const bool alone = word && event_hidden && st.words_alone.load(std::memory_order_relaxed);
      note(alone ? "cuStreamWriteValue64" : "cuEventRecord");
      if (word) {
        const std::uint64_t value = slot->written + 1;
        if (CUresult r = detail::driver().cuStreamWriteValue64(s.get(), slot->word_device, value, 0);
            r != CUDA_SUCCESS)
          detail::throw_cu(r, "cuStreamWriteValue64", s.describe(), where);
        slot->written = slot->expected = value;
        slot->fault_checked_ns.store(0, std::memory_order_relaxed);
        st.word_waits.fetch_add(1, std::memory_order_relaxed);
        slot->word_alone.store(alone, std::memory_order_relaxed);
      }
      if (!alone) ev.record(s, where);
      ++stream.outstanding;
      ++stream.recorded;
      slot->stream_key = id;
      slot->first_seq = first ? stream.recorded : 0;
      order = st.next_order.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    trace::flight::set_status(flown, trace::flight::status::failed);
    slot->expected = 0;
    pool->give_back(slot);
    detail::settle_stream(s);
    throw;  // the ticket's place is given back by its destructor
  }
  if (flown) [[unlikely]] {
    trace::flight::set_status(flown, trace::flight::status::enqueued);
    slot->flight = flown;
  }
  if (ticket) {
    // The wait takes the place over: given back when its event completes (release). A hold ends here.
    if (ticket.hold_) ticket.end_hold();
    if (std::exchange(ticket.granted_, false)) settle_grant(ticket.stream_key_);  // enqueued: others may pass now
    slot->admit_key = ticket.stream_key_;
    ticket.pool_.reset();
  }
  return pooled_event(slot, s, order, queue_key);
}

void cuda_completion_source::use_host_words(bool on) noexcept { st().host_words.store(on, std::memory_order_relaxed); }

void cuda_completion_source::use_words_alone(bool on) noexcept {
  st().words_alone.store(on, std::memory_order_relaxed);
}

std::uint64_t cuda_completion_source::host_word_waits() const noexcept {
  return st().word_waits.load(std::memory_order_relaxed);
}

std::size_t cuda_completion_source::created_events(context_ref ctx, std::source_location where) const {
  return event_pool::for_context(ctx, where)->created();
}

std::size_t cuda_completion_source::idle_events(context_ref ctx, std::source_location where) const {
  return event_pool::for_context(ctx, where)->idle();
}

wait_target cuda_completion_source::target(event_ref e, std::shared_ptr<void> keep_alive) {
  const auto handle = reinterpret_cast<std::uintptr_t>(e.get());
  return {&instance(), handle, reinterpret_cast<std::uintptr_t>(e.context().get()), handle | user_event_bit,
          std::move(keep_alive)};
}

bool cuda_completion_source::is_sticky(CUresult r) noexcept { return cuasync::is_sticky(r); }

poll_result cuda_completion_source::query(std::uintptr_t token) noexcept {
  CUevent ev;
  if (token & user_event_bit) {
    ev = reinterpret_cast<CUevent>(token & ~user_event_bit);
  } else {
    // The word is written after the work before it, with a fence: reaching the expected value means done.
    auto& slot = *reinterpret_cast<detail::event_slot*>(token);
    if (slot.expected != 0) {
      if (std::atomic_ref<std::uint64_t>(*slot.word).load(std::memory_order_acquire) >= slot.expected) {
        if (slot.flight) [[unlikely]]
          trace::flight::seen_done(slot.flight);  // its stream's operations up to it are done
        return {poll_status::ready, {}, {}};
      }
      // The word is still to come. In a pass, its event is asked only every fault_check_period_ns (a faulted
      // context never writes the word: the event brings its error): a pass over many streams' lone waits is then
      // plain loads, where a query of each pending event cost ~0.25 µs (18.6 µs a pass at 64 streams on the H200).
      if (const long long now = detail::pass_now_ns) {
        const long long last = slot.fault_checked_ns.load(std::memory_order_relaxed);
        if (last == 0 || now - last < fault_check_period_ns) {
          if (last == 0) slot.fault_checked_ns.store(now, std::memory_order_relaxed);
          return {poll_status::pending, {}, {}};
        }
        slot.fault_checked_ns.store(now, std::memory_order_relaxed);
      }
    }
    ev = slot.event;
  }
  // Pending word (or none): the event says whether the work is still running or failed (a faulted context never
  // writes the word). cuEventQuery needs no current context (measured on the H200).
  const CUresult r = detail::driver().cuEventQuery(ev);
  if (r == CUDA_ERROR_NOT_READY) return {poll_status::pending, {}, {}};
  if (r == CUDA_SUCCESS && !(token & user_event_bit) &&
      reinterpret_cast<const detail::event_slot*>(token)->word_alone.load(std::memory_order_relaxed))
    return {poll_status::pending, {}, {}};  // not recorded for this wait: only its error would tell
  if (r == CUDA_SUCCESS) {
    if (!(token & user_event_bit))
      if (const trace::flight::mark m = reinterpret_cast<const detail::event_slot*>(token)->flight) [[unlikely]]
        trace::flight::seen_done(m);
    return {poll_status::ready, {}, {}};
  }
  if (!(token & user_event_bit)) {
    if (const trace::flight::mark m = reinterpret_cast<const detail::event_slot*>(token)->flight) {
      const char* name = nullptr;
      if (detail::driver().cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
      trace::flight::seen_fault(m, static_cast<int>(r), name);  // the recorder's thread dumps
    }
  }
  return {poll_status::failed, make_error_code(r), is_sticky(r) ? failure_scope::group : failure_scope::operation};
}

void cuda_completion_source::release(std::uintptr_t token) noexcept {
  if (token == 0 || (token & user_event_bit)) return;
  auto* slot = reinterpret_cast<detail::event_slot*>(token);
  slot->flight = {};  // released unfinished too (a pooled_event dropped): only a query that saw it done marks it
  state& st = this->st();
  bool place_given = false;
  if (slot->stream_key != 0) {
    record_shard& shard = st.shard(slot->stream_key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.streams.find(slot->stream_key);
    if (it != shard.streams.end()) {
      stream_state& stream = it->second;
      if (slot->first_seq != 0) stream.words = stream.recorded == slot->first_seq;  // nobody joined it
      // An admitted operation's place is on the same stream (the usual case): given back under this lock too.
      if (slot->admit_key == slot->stream_key) {
        --stream.admitted;
        place_given = true;
      }
      if (--stream.outstanding == 0) shard.maybe_sweep();
    }
    slot->stream_key = slot->first_seq = 0;
  }
  slot->expected = 0;
  if (const std::uint64_t key = std::exchange(slot->admit_key, 0)) {
    if (place_given)
      places_given(*slot->pool, 1);
    else
      give_place(*slot->pool, key, false, false);
  }
  slot->pool->give_back(slot);
}

}  // namespace cuasync
