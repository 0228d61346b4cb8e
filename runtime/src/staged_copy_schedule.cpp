// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The staged copier's schedule: which copy gets the next free slot (fairness between streams, arrival order on one
// stream, the one question to a busy stream), and each chunk's steps (fill, DMA, drain) as slots free up.
#include "staged_copy_parts.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/trace/hooks.hpp>
#include <cuasync/trace/scope.hpp>

#include <algorithm>

namespace cuasync::runtime {

void staged_copier::pump_locked(outcalls& out) {
  if (ring_state_ == ring_state::failed) {
    // The ring could not be allocated: the copies waiting for it fail with that error.
    for (auto& j : jobs_)
      if (!j->stopped()) {
        j->error_detail = ring_error_detail_;
        fail_locked(*j, ring_error_, out);
      }
    return;
  }
  if (ring_state_ == ring_state::growing) return;  // the copies wait (asynchronously) for grow_ring
  // One slot at a time: a failed start frees its slot and stops its job (a nested pump may take slots meanwhile), so
  // each turn looks again.
  for (;;) {
    // A slot without memory: its block is still being allocated (grow_ring makes them one at a time).
    if (std::none_of(slots_.begin(), slots_.end(), [](const auto& sl) { return !sl->j && sl->mem; })) return;
    job* j = next_taker_locked();
    if (!j) return;
    // The copy whose turn it is waits for its kind of slot (a whole block for whole chunks): the others wait behind
    // it, so its turn comes as the ring frees up.
    slot* free_slot = free_slot_for_locked(*j);
    if (!free_slot) return;
    if (!j->asked) {
      // Once per copy, never per chunk: a lone copy on an idle stream keeps today's path.
      j->asked = true;
      // Behind an earlier copy of ours on its stream whose DMAs are still to complete, the stream is busy with them:
      // not a reason to hold back (back-to-back copies keep the whole ring); it inherits that copy's answer instead
      // of asking. A copy whose DMAs are done (it may stay listed while draining or reporting) says nothing of the
      // stream now: a kernel may have been enqueued since, and inheriting its "not busy" put every slot behind it.
      const job* before = nullptr;
      for (const auto& e : jobs_) {
        if (e.get() == j) break;
        if (e->stream_key == j->stream_key) before = e.get();
      }
      if (before && before->dmas_pending()) {
        j->throttled = before->throttled;
        start_chunk_locked(*j, *free_slot, out);
        continue;
      }
      try {
        // Relaxed, as the poller is: in global mode the query would invalidate another thread's capture (PyTorch's).
        thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED, j->where);
        j->throttled = !j->s.query(j->where);
      } catch (const std::system_error& e) {
        j->error_detail = std::current_exception();
        fail_locked(*j, e.code(), out);
        continue;
      } catch (...) {
        fail_locked(*j, std::make_error_code(std::errc::not_enough_memory), out);
        continue;
      }
    }
    start_chunk_locked(*j, *free_slot, out);
  }
}

staged_copier::slot* staged_copier::free_slot_for_locked(const job& j) {
  const auto free = [](const slot* sl) { return sl && !sl->j && sl->mem; };
  if (j.whole_chunks) {  // a block's lower half (even index) with its upper half free too
    for (std::size_t i = 0; i < slots_.size(); i += 2)
      if (free(slots_[i].get()) && free(slots_[i]->partner)) return slots_[i].get();
    return nullptr;
  }
  // A half whose partner is taken first: whole blocks stay free for copies with whole chunks.
  slot* any = nullptr;
  for (const auto& sl : slots_) {
    if (!free(sl.get())) continue;
    if (!free(sl->partner)) return sl.get();
    if (!any) any = sl.get();
  }
  return any;
}

staged_copier::job* staged_copier::next_taker_locked() {
  job* taker = nullptr;
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    job& j = *jobs_[i];
    if (j.stopped() || (j.throttled && j.in_flight > 0)) continue;
    if (taker && taker->in_flight <= j.in_flight) continue;  // the fewest slots first; the earlier on a tie
    const bool behind_on_its_stream = std::any_of(jobs_.begin(), jobs_.begin() + static_cast<std::ptrdiff_t>(i),
                                                  [&](const auto& e) { return e->stream_key == j.stream_key && !e->all_enqueued(); });
    if (!behind_on_its_stream) taker = &j;
  }
  return taker;
}

void staged_copier::fail_locked(job& j, std::error_code ec, outcalls& out) {
  if (!j.error) j.error = ec;
  report_done_locked(j, out);  // holds no slot: done now
}

void staged_copier::start_chunk_locked(job& j, slot& sl, outcalls& out) {
  sl.j = &j;
  if (j.whole_chunks) {  // the block's upper half is this chunk's too
    sl.whole = true;
    sl.partner->j = &j;
  }
  sl.chunk = j.started++;
  sl.len = j.layout.length(sl.chunk);
  ++j.in_flight;
  if (!j.to_device) return enqueue_dma_locked(j, sl, out);
  try {
    host_copy(j, sl.mem, j.host + j.layout.offset(sl.chunk), sl.len, [this, &sl] { on_filled(sl); });
  } catch (...) {
    chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
  }
}

void staged_copier::host_copy(const job& j, std::byte* dst, const std::byte* src, std::size_t len,
                              std::function<void()> then) {
  // The store kind by measurement (store_choice.hpp): a timed chunk reports its time before going on.
  store_chooser& choice = j.to_device ? h2d_stores_ : d2h_stores_;
  const store_chooser::pick p = choice.next(j.n, len);
  if (!p.sample) return team_->submit(dst, src, len, p.streaming, std::move(then));
  auto timed = [&choice, n = j.n, len, streaming = p.streaming, then = std::move(then)](std::chrono::nanoseconds t) {
    choice.report(n, streaming, len, t);
    then();
  };
  team_->submit_timed(dst, src, len, p.streaming, std::move(timed));
}

void staged_copier::enqueue_dma_locked(job& j, slot& sl, outcalls& out) {
  const std::size_t off = j.layout.offset(sl.chunk);
  detail::copy_category_scope traced_as(trace::category::staged_copy_chunk);  // the DMA of one chunk, not a copy
  try {
    if (j.to_device)
      cuasync::copy_async(j.s, device_span{j.dev + off, sl.len}, std::span<const std::byte>(sl.mem, sl.len), j.where);
    else
      cuasync::copy_async(j.s, std::span<std::byte>(sl.mem, sl.len), device_span{j.dev + off, sl.len}, j.where);
    pooled_event ev = events_->record(j.s, j.where);
    ++j.dmas;
    if (j.dmas == j.total && !j.reported_enqueued) {
      j.reported_enqueued = true;
      out.enqueued.push_back(&j);
    }
    completion_callbacks::instance().wait(std::move(ev).into_target(), &sl);
  } catch (const std::system_error& e) {
    if (!j.error) j.error_detail = std::current_exception();
    chunk_finished_locked(j, sl, e.code(), out);
  } catch (...) {
    chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
  }
}

void staged_copier::on_filled(slot& sl) {
  outcalls out;
  {
    std::unique_lock lock(mutex_, std::defer_lock);
    {
      // A filled chunk's DMA waits for the copier's lock (held by other chunks' DMA calls and the set-up): traced,
      // since a 64 MiB copy's first DMA started 20-100 us after its chunk was filled on the GPU machines.
      trace::scope waited(trace::category::staged_copy_chunk, "filled chunk waits for the copier", sl.len);
      lock.lock();
    }
    job& j = *sl.j;
    if (j.error) {
      chunk_finished_locked(j, sl, {}, out);  // a chunk failed meanwhile: this one is not sent
    } else {
      enqueue_dma_locked(j, sl, out);
      if (j.all_enqueued()) pump_locked(out);  // its last DMA: a later copy on its stream may start
    }
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::on_dma_done(slot& sl, std::error_code ec) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    job& j = *sl.j;
    ++j.dmas_done;
    const bool was_throttled = j.throttled;
    j.throttled = false;  // the work ahead of it on its stream is done
    if (j.to_device || ec || j.error) {
      chunk_finished_locked(j, sl, ec, out);
    } else {
      try {
        host_copy(j, j.host + j.layout.offset(sl.chunk), sl.mem, sl.len, [this, &sl] { on_drained(sl); });
      } catch (...) {
        chunk_finished_locked(j, sl, std::make_error_code(std::errc::not_enough_memory), out);
      }
      if (was_throttled) pump_locked(out);  // it holds its slot until drained: the free ones are its to take now
    }
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::on_drained(slot& sl) {
  outcalls out;
  {
    std::lock_guard lock(mutex_);
    chunk_finished_locked(*sl.j, sl, {}, out);
    reap_locked(out);
    ++running_;  // until run() is done: the destructor waits for it
  }
  run(out);
}

void staged_copier::chunk_finished_locked(job& j, slot& sl, std::error_code ec, outcalls& out) {
  if (ec && !j.error) j.error = ec;
  sl.j = nullptr;
  if (sl.whole) {
    sl.whole = false;
    sl.partner->j = nullptr;
  }
  --j.in_flight;
  ++j.finished;
  report_done_locked(j, out);
  pump_locked(out);
}

void staged_copier::report_done_locked(job& j, outcalls& out) {
  // Never before `enqueued` has returned: the last chunk may complete (on another thread) while `enqueued` is still
  // being called, and `done` may free the callback.
  if (j.reported_enqueued && !j.enqueued_called) return;
  if (j.in_flight == 0 && (j.error || j.finished == j.total) && !j.reported_done) {
    j.reported_done = true;
    team_->release_awake();  // held since start()
    out.done.push_back({j.cb, j.error, j.error_detail});
  }
}

}  // namespace cuasync::runtime
