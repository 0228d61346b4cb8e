// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `memcpy_team`: persistent threads that split host `memcpy`s between them. One thread copies ~10 GB/s on the
//! H200 machine; eight reach ~31 GB/s — what staged pageable copies need. Copies are jobs in a FIFO: `copy` waits for
//! its job (the caller copies parts too), `submit` returns at once and calls back when the job is done, so the thread
//! that submits (an io thread) never does the copying.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cuasync::runtime {

class memcpy_team {
 public:
  //! `threads` copying threads (0 picks 3/4 of the hardware threads, at most 12).
  explicit memcpy_team(unsigned threads = 0);
  memcpy_team(const memcpy_team&) = delete;
  memcpy_team& operator=(const memcpy_team&) = delete;
  //! Waits for the jobs already submitted, then stops the threads. May run inside a `done` call (on a team thread:
  //! that thread is let go rather than joined, and leaves once `done` returns).
  ~memcpy_team();

  //! Copies `n` bytes, split across the team and the caller; returns when all of it is copied.
  //! `streaming`: non-temporal stores (no read-for-ownership of the destination, which also stays out of the cache).
  void copy(void* dst, const void* src, std::size_t n, bool streaming = false);
  //! Queues a copy and returns at once; `done()` runs on a team thread once every byte is copied (it must not block:
  //! the team's threads wait for it). Memory must stay valid until then. @throws std::bad_alloc
  void submit(void* dst, const void* src, std::size_t n, bool streaming, std::function<void()> done);
  //! `submit`, with the copy's time passed to `done`: from the claim of its first part to the end of its last (what
  //! choosing a store kind by measurement compares). @throws std::bad_alloc
  void submit_timed(void* dst, const void* src, std::size_t n, bool streaming,
                    std::function<void(std::chrono::nanoseconds)> done);
  //! Copies one part of the oldest job with parts left, on the calling thread (a thread that waits for the team's
  //! work lends a hand); false when there was none. The part's job may finish here: its `done` then runs on this
  //! thread, and may destroy the team (this call touches nothing of it afterwards).
  bool help_one() noexcept;
  //! A copy is about to come: the sleeping threads are woken now and idle ones spin (rather than sleep) for
  //! `spin_window()`, so the copy's first parts are claimed at once. A thread woken from sleep starts 30-130 us late
  //! on the GPU machines, longer than a 4 MiB chunk's host copy; call this before a copy's set-up (stream queries,
  //! the ring) so that the wake-up overlaps it.
  void wake_ahead() noexcept;
  //! While held (a count), idle threads spin instead of sleeping: a copy in flight submits its chunks' jobs one by
  //! one (a device-to-host chunk only once its DMA is done). Each hold is released once, when the copy is done.
  void hold_awake() noexcept;
  void release_awake() noexcept;
  unsigned size() const noexcept { return static_cast<unsigned>(workers_.size()); }
  //! How long idle threads spin after `wake_ahead`: longer than a copy's set-up and first DMA. After a job, with no
  //! hold, they spin a sixth of it (back-to-back copies), then sleep: an idle team costs nothing.
  //! `CUASYNC_COPY_SPIN_US` sets it for the process (0: threads never spin, as they did before).
  static std::chrono::microseconds spin_window() noexcept;
  //! The smallest part a job is cut into (256 KiB; `CUASYNC_COPY_MIN_PART_KIB` sets it for the process, 4 KiB to
  //! 1 GiB): a job smaller than threads x this one has fewer parts than threads, and the idle threads take the next
  //! job's parts. Smaller parts put the whole team on a staged copy's first, small chunk (its DMA starts sooner) at
  //! the price of a claim per part.
  static std::size_t min_part_bytes() noexcept;

 private:
  struct job;
  // What the threads share, owned by them too: a thread let go by the destructor still reads it on its way out.
  struct crew {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::shared_ptr<job>> jobs;  // jobs with parts left to claim, oldest first
    unsigned sleeping = 0;                   // threads waiting on `wake` (under mutex)
    std::atomic<bool> stopping{false};
    std::atomic<std::uint64_t> posted{0};    // jobs queued ever: what a spinning thread watches
    std::atomic<std::int64_t> spin_until{0};  // steady-clock ns until which idle threads spin
    std::atomic<int> holds{0};                // copies in flight that keep idle threads spinning
  };
  // Keeps idle threads spinning for `window` from now.
  static void stay_awake(crew& c, std::chrono::microseconds window) noexcept;
  static bool spinning(const crew& c) noexcept;
  static void work(const std::shared_ptr<crew>& c);
  static void copy_part(const job& j, std::size_t part) noexcept;
  // `caller_copies`: the thread that queues it copies parts too (copy(), not submit()).
  std::shared_ptr<job> enqueue(void* dst, const void* src, std::size_t n, bool streaming, std::function<void()> done,
                               std::function<void(std::chrono::nanoseconds)> timed_done, bool caller_copies);
  // Claims the next part of the front job (under c.mutex); returns false when none is left.
  static bool claim_locked(crew& c, std::shared_ptr<job>& j, std::size_t& part);
  static void finish_part(const std::shared_ptr<job>& j);

  std::shared_ptr<crew> crew_ = std::make_shared<crew>();
  std::vector<std::thread> workers_;
};

}  // namespace cuasync::runtime
