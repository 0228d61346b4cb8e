// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/ordered_copy.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/instrumented_op.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/trace/hooks.hpp>

#include <algorithm>
#include <mutex>

namespace cuasync::runtime {

namespace {
constexpr const char* api = "cuasync::runtime::start_ordered_copy";

// One copy, kept alive by itself (`self`) until every chunk is done with, every copy-thread job has run and every
// wait it put on the stream is released. Chunk c uses chunks[c % k]. H2D: chunk c's DMA waits for number n_c, which
// its fill releases; the fill of c >= k starts once chunk c - k's DMA has completed. D2H: chunk c >= k's DMA waits
// for n_c, released once chunk c - k is drained out of the memory they share.
class ordered_copy final {
 public:
  ordered_copy(ordered_copy_request r, ordered_copy_callback* cb)
      : r_(std::move(r)), cb_(cb), chunk_(r_.chunks.front().size()),
        count_((r_.bytes + chunk_ - 1) / chunk_), k_(std::min(r_.chunks.size(), count_)),
        waits_(new chunk_wait[count_]), numbers_(count_, 0), ready_(count_, 0), issued_(count_, 0) {
    for (std::size_t c = 0; c < count_; ++c) {
      waits_[c].owner = this;
      waits_[c].c = c;
    }
    for (std::size_t c = 0; c < k_ && r_.to_device; ++c) ready_[c] = 1;  // their memory is free from the start
  }

  // False: nothing enqueued, the device has no stream memory operations.
  static bool start(std::shared_ptr<ordered_copy> self, std::source_location where) {
    ordered_copy& o = *self;
    o.self_ = std::move(self);
    return o.enqueue_all(where);
  }

 private:
  struct chunk_wait final : completion_callback {
    ordered_copy* owner = nullptr;
    std::size_t c = 0;
    void complete(std::error_code ec) noexcept override { owner->on_dma_done(c, ec); }
  };

  std::byte* memory_of(std::size_t c) const noexcept { return r_.chunks[c % k_].data<std::byte>(); }
  std::size_t length_of(std::size_t c) const noexcept { return std::min(chunk_, r_.bytes - c * chunk_); }

  bool enqueue_all(std::source_location where) {
    bool enqueued_any = false;
    std::exception_ptr failure;
    std::size_t c = 0;
    try {
      for (; c < count_; ++c) {
        {
          std::lock_guard lock(mutex_);
          if (error_) break;  // a chunk failed meanwhile: nothing more is enqueued
        }
        enqueue_chunk(c, enqueued_any, where);
      }
    } catch (const no_stream_memory_operations&) {
    } catch (...) {
      failure = std::current_exception();
    }
    if (!enqueued_any && (failure || unsupported_)) {
      // Nothing is on the stream and no copy-thread job runs: the copy never started.
      std::shared_ptr<ordered_copy> keep = std::move(self_);
      if (failure) std::rethrow_exception(failure);
      return false;
    }
    std::unique_lock lock(mutex_);
    if (failure && !error_) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::system_error& e) {
        error_ = e.code();
      } catch (...) {
        error_ = std::make_error_code(std::errc::not_enough_memory);
      }
    }
    end_pending_locked(lock);  // the call's own count
    return true;
  }

  // Chunk c's wait (where needed), its DMA and the event after it. Marks what the failure paths need to know.
  void enqueue_chunk(std::size_t c, bool& enqueued_any, std::source_location where) {
    const bool waits = r_.to_device || c >= k_;
    if (waits) {
      const std::uint32_t n = r_.gate->enqueue_wait(r_.s);
      if (n == 0) {
        if (!enqueued_any) {
          unsupported_ = true;  // the first wait: nothing of the copy is on the stream
          throw no_stream_memory_operations{};
        }
        detail::throw_invalid(api, "the stream's device has no stream memory operations", where);
      }
      enqueued_any = true;
      std::unique_lock lock(mutex_);
      numbers_[c] = n;
      issued_[c] = 1;
      if (ready_[c]) release_or_fill_locked(c, lock);  // H2D: fill now; D2H: its memory was drained already
    } else {
      std::lock_guard lock(mutex_);
      issued_[c] = 1;
    }
    const std::size_t off = c * chunk_, len = length_of(c);
    {
      detail::copy_category_scope traced_as(trace::category::staged_copy_chunk);  // one chunk's DMA, not a copy
      if (r_.to_device)
        cuasync::copy_async(r_.s, device_span{r_.device + off, len}, std::span<const std::byte>(memory_of(c), len),
                            where);
      else
        cuasync::copy_async(r_.s, std::span<std::byte>(memory_of(c), len), device_span{r_.device + off, len}, where);
    }
    enqueued_any = true;
    try {
      pooled_event ev = r_.events->record(r_.s, where);
      {
        std::lock_guard lock(mutex_);
        ++pending_;
      }
      try {
        completion_callbacks::instance().wait(std::move(ev).into_target(), &waits_[c]);
      } catch (...) {
        std::lock_guard lock(mutex_);
        --pending_;  // never reaches zero here: the call holds its own count
        throw;
      }
    } catch (...) {
      // The DMA is on the stream with nothing to say when it is done: its memory must not go back to the pool.
      std::lock_guard lock(mutex_);
      tainted_ = c % k_ + 1;
      throw;
    }
  }

  // H2D: fill chunk c (or, after a failure, only release its wait). D2H: release chunk c's wait. Under mutex_ (the
  // lock is let go around the hand-off to the copy threads, whose queue has its own lock).
  void release_or_fill_locked(std::size_t c, std::unique_lock<std::mutex>& lock) {
    const std::uint32_t n = numbers_[c];
    if (!r_.to_device || error_) {
      lock.unlock();
      r_.gate->release(n);
      lock.lock();
      return;
    }
    ++pending_;
    lock.unlock();
    try {
      r_.team->submit(memory_of(c), r_.host + c * chunk_, length_of(c), r_.streaming_stores, [this, n] {
        r_.gate->release(n);
        std::unique_lock l(mutex_);
        end_pending_locked(l);
      });
      lock.lock();
    } catch (...) {
      r_.gate->release(n);
      lock.lock();
      if (!error_) error_ = std::make_error_code(std::errc::not_enough_memory);
      --pending_;  // the call or a chunk still holds a count: not the last
    }
  }

  // Chunk c's memory is free for chunk c + k: mark it, and fill or release that chunk if its wait is on the stream.
  void next_may_go_locked(std::size_t c, std::unique_lock<std::mutex>& lock) {
    const std::size_t next = c + k_;
    if (next >= count_) return;
    ready_[next] = 1;
    if (issued_[next]) release_or_fill_locked(next, lock);
  }

  // Poller thread: chunk c's DMA completed (or failed).
  void on_dma_done(std::size_t c, std::error_code ec) noexcept {
    std::unique_lock lock(mutex_);
    if (ec && !error_) error_ = ec;
    if (r_.to_device || error_) {
      next_may_go_locked(c, lock);
      end_pending_locked(lock);
      return;
    }
    lock.unlock();
    try {
      r_.team->submit(r_.host + c * chunk_, memory_of(c), length_of(c), r_.streaming_stores, [this, c] {
        std::unique_lock l(mutex_);
        next_may_go_locked(c, l);
        end_pending_locked(l);
      });
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::make_error_code(std::errc::not_enough_memory);
      next_may_go_locked(c, lock);
      end_pending_locked(lock);
    }
  }

  // One count less; the last one reports and lets the copy go (then nothing of it may be touched).
  void end_pending_locked(std::unique_lock<std::mutex>& lock) noexcept {
    if (--pending_ != 0) return;
    const std::error_code ec = error_;
    lock.unlock();
    if (tainted_) {
      pinned_block& b = r_.chunks[tainted_ - 1];
      try {
        b.record_use(r_.s);  // not handed out again before the DMA without an event is done
      } catch (...) {
        new pinned_block(std::move(b));  // kept for the life of the process rather than handed out under a DMA
      }
    }
    ordered_copy_callback* cb = cb_;
    std::shared_ptr<ordered_copy> keep = std::move(self_);
    keep.reset();  // the chunks go back to the pool: every DMA that used them has completed
    cb->done(ec);
  }

  ordered_copy_request r_;
  ordered_copy_callback* cb_;
  std::size_t chunk_, count_, k_;
  std::unique_ptr<chunk_wait[]> waits_;
  std::mutex mutex_;
  std::vector<std::uint32_t> numbers_;  // chunk c's wait number (0: none)
  std::vector<char> ready_;             // chunk c's memory is free for it
  std::vector<char> issued_;            // chunk c's wait (or, without one, its place) is on the stream
  std::error_code error_;
  std::size_t pending_ = 1;  // the call, the chunks' DMA waits, the copy threads' jobs
  std::size_t tainted_ = 0;  // 1 + the chunk memory a DMA without an event uses; 0: none
  bool unsupported_ = false;  // the first wait found no stream memory operations
  std::shared_ptr<ordered_copy> self_;
  struct no_stream_memory_operations {};
};
}  // namespace

bool start_ordered_copy(ordered_copy_request r, ordered_copy_callback* cb, std::source_location where) {
  if (!r.s) detail::throw_invalid(api, "empty stream", where);
  if (r.bytes == 0 || !r.host || !r.device) detail::throw_invalid(api, "empty copy", where);
  if (r.chunks.empty() || !r.gate || !r.team || !r.events || !cb)
    detail::throw_invalid(api, "needs chunks, the stream's gate, copy threads, an event pool and a callback", where);
  const std::size_t chunk = r.chunks.front().size();
  const auto short_chunk = [&](const pinned_block& b) { return b.size() < chunk; };
  if (chunk == 0 || std::any_of(r.chunks.begin(), r.chunks.end(), short_chunk))
    detail::throw_invalid(api, "chunks of different sizes: the first one's is the chunk size", where);
  return ordered_copy::start(std::make_shared<ordered_copy>(std::move(r), cb), where);
}

}  // namespace cuasync::runtime
