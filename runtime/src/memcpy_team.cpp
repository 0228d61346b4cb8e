// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/memcpy_team.hpp>

#include <cuasync/trace/scope.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define CUASYNC_HAVE_SSE2 1
#endif

namespace cuasync::runtime {

namespace {
// Copies with non-temporal stores: when the destination is not read again soon, streaming stores skip the
// read-for-ownership of every destination line (a third less memory traffic than memcpy's stores at these sizes,
// where each thread's part is below glibc's own non-temporal threshold). Whether that wins depends on the machine's
// caches: bench/runtime measures both.
void copy_streaming(std::byte* dst, const std::byte* src, std::size_t n) {
#if CUASYNC_HAVE_SSE2
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16;
  if (n < head + 256) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before the part is reported done
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}
}  // namespace

// A copy split into parts of whole 4 KiB pages where possible, so two threads never share a page.
struct memcpy_team::job {
  std::byte* dst;
  const std::byte* src;
  std::size_t n;
  bool streaming;
  std::size_t parts, per;
  std::size_t next = 0;                 // the next part to claim (under crew::mutex)
  std::atomic<std::size_t> remaining;   // parts not yet copied
  std::function<void()> done;           // submit: called by whoever copies the last part
  std::function<void(std::chrono::nanoseconds)> timed_done;  // submit_timed: the same, with the copy's time
  std::chrono::steady_clock::time_point started{};           // when its first part was claimed (under crew::mutex)
  // copy: the caller waits for this
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
};

memcpy_team::memcpy_team(unsigned threads) {
  // Host memcpy bandwidth grows with threads up to ~12 on the H200 machine's 16 cores; leave some cores to the rest.
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency() * 3 / 4, 1u, 12u);
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([c = crew_] { work(c); });
}

memcpy_team::~memcpy_team() {
  {
    std::lock_guard lock(crew_->mutex);
    crew_->stopping.store(true, std::memory_order_relaxed);
  }
  crew_->wake.notify_all();
  // Inside a done() on one of the team's threads (its owner released there), that thread cannot be joined: it is let
  // go, and leaves through work() once done() returns, holding the crew.
  bool on_team = false;
  for (auto& t : workers_) {
    if (t.get_id() == std::this_thread::get_id()) {
      on_team = true;
      t.detach();
    } else {
      t.join();
    }
  }
  if (!on_team) return;
  // The others drained the queue before leaving; without others, this thread copies what is left.
  while (help_one()) {
  }
}

void memcpy_team::copy_part(const job& j, std::size_t part) noexcept {
  const std::size_t begin = std::min(j.n, j.per * part);
  const std::size_t end = part + 1 == j.parts ? j.n : std::min(j.n, begin + j.per);
  if (end <= begin) return;
  // The host side of a staged chunk (pageable <-> pinned ring), on this copy thread's lane.
  trace::scope traced(trace::category::staged_copy_chunk, "host memcpy", end - begin);
  if (j.streaming)
    copy_streaming(j.dst + begin, j.src + begin, end - begin);
  else
    std::memcpy(j.dst + begin, j.src + begin, end - begin);
}

std::shared_ptr<memcpy_team::job> memcpy_team::enqueue(void* dst, const void* src, std::size_t n, bool streaming,
                                                       std::function<void()> done,
                                                       std::function<void(std::chrono::nanoseconds)> timed_done,
                                                       bool caller_copies) {
  auto j = std::make_shared<job>();
  j->dst = static_cast<std::byte*>(dst);
  j->src = static_cast<const std::byte*>(src);
  j->n = n;
  j->streaming = streaming;
  // One part per thread that copies (the caller of copy() too; not the one that submits), of at least
  // min_part_bytes(): a hand-off costs more than it saves. One part more than threads would make one of them copy two
  // while the others wait: the job would take twice as long.
  const std::size_t threads = std::max<std::size_t>(workers_.size() + (caller_copies ? 1 : 0), 1);
  j->parts = std::clamp<std::size_t>(n / min_part_bytes(), 1, threads);
  j->per = ((n / j->parts) + 4095) & ~std::size_t{4095};
  j->remaining.store(j->parts, std::memory_order_relaxed);
  j->done = std::move(done);
  j->timed_done = std::move(timed_done);
  // Notified under the lock: once it is released a thread may copy the whole job and its `done` may destroy the
  // team (an ordered copy's last chunk reports, and its owner lets the team go), so nothing of the team is touched
  // after it (ThreadSanitizer saw the condition variable destroyed under a notify made after the unlock).
  stay_awake(*crew_, spin_window() / 6);  // back-to-back jobs find the threads awake
  std::lock_guard lock(crew_->mutex);
  crew_->jobs.push_back(j);
  crew_->posted.fetch_add(1, std::memory_order_release);  // the spinning threads see it without the lock
  if (crew_->sleeping == 0) return j;
  if (j->parts > 1)
    crew_->wake.notify_all();
  else
    crew_->wake.notify_one();
  return j;
}

namespace {
std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::chrono::microseconds memcpy_team::spin_window() noexcept {
  static const std::chrono::microseconds window = [] {
    const char* v = std::getenv("CUASYNC_COPY_SPIN_US");
    return std::chrono::microseconds(v && *v ? std::strtoll(v, nullptr, 10) : 300);
  }();
  return window;
}

std::size_t memcpy_team::min_part_bytes() noexcept {
  static const std::size_t bytes = [] {
    const char* v = std::getenv("CUASYNC_COPY_MIN_PART_KIB");
    const long long kib = v && *v ? std::strtoll(v, nullptr, 10) : 256;
    return static_cast<std::size_t>(std::clamp<long long>(kib, 4, 1 << 20)) << 10;
  }();
  return bytes;
}

void memcpy_team::stay_awake(crew& c, std::chrono::microseconds window) noexcept {
  if (window.count() <= 0) return;
  const std::int64_t until = steady_ns() + std::chrono::nanoseconds(window).count();
  std::int64_t old = c.spin_until.load(std::memory_order_relaxed);
  while (old < until && !c.spin_until.compare_exchange_weak(old, until, std::memory_order_relaxed)) {
  }
}

bool memcpy_team::spinning(const crew& c) noexcept {
  if (spin_window().count() <= 0) return false;
  return c.holds.load(std::memory_order_relaxed) > 0 || steady_ns() < c.spin_until.load(std::memory_order_relaxed);
}

void memcpy_team::wake_ahead() noexcept {
  if (workers_.empty() || spin_window().count() <= 0) return;
  stay_awake(*crew_, spin_window());
  std::lock_guard lock(crew_->mutex);  // notified under the lock, as enqueue does
  if (crew_->sleeping > 0) crew_->wake.notify_all();
}

void memcpy_team::hold_awake() noexcept { crew_->holds.fetch_add(1, std::memory_order_relaxed); }

void memcpy_team::release_awake() noexcept { crew_->holds.fetch_sub(1, std::memory_order_relaxed); }

bool memcpy_team::claim_locked(crew& c, std::shared_ptr<job>& j, std::size_t& part) {
  while (!c.jobs.empty()) {
    job& front = *c.jobs.front();
    if (front.next < front.parts) {
      j = c.jobs.front();
      if (front.next == 0) front.started = std::chrono::steady_clock::now();
      part = front.next++;
      if (front.next == front.parts) c.jobs.pop_front();  // every part claimed
      return true;
    }
    c.jobs.pop_front();
  }
  return false;
}

void memcpy_team::finish_part(const std::shared_ptr<job>& j) {
  if (j->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (j->timed_done) {
    j->timed_done(std::chrono::steady_clock::now() - j->started);
    return;
  }
  if (j->done) {
    j->done();
    return;
  }
  std::lock_guard lock(j->mutex);
  j->finished = true;
  j->finished_cv.notify_all();
}

void memcpy_team::work(const std::shared_ptr<crew>& c) {
  for (;;) {
    std::shared_ptr<job> j;
    std::size_t part = 0;
    {
      std::unique_lock lock(c->mutex);
      while (!claim_locked(*c, j, part)) {
        if (c->stopping.load(std::memory_order_relaxed)) return;
        if (spinning(*c)) {
          // A copy is coming or under way: watch for its next job without the lock rather than sleep (a thread
          // woken from sleep comes tens of microseconds late).
          const std::uint64_t seen = c->posted.load(std::memory_order_acquire);
          lock.unlock();
          for (unsigned spins = 1;; ++spins) {
            if (c->posted.load(std::memory_order_acquire) != seen || c->stopping.load(std::memory_order_relaxed))
              break;
            if (spins % 64 == 0 && !spinning(*c)) break;
#if CUASYNC_HAVE_SSE2
            _mm_pause();
#endif
          }
          lock.lock();
          continue;
        }
        ++c->sleeping;
        c->wake.wait(lock);
        --c->sleeping;
      }
    }
    copy_part(*j, part);
    finish_part(j);
  }
}

void memcpy_team::copy(void* dst, const void* src, std::size_t n, bool streaming) {
  if (n < (std::size_t{256} << 10) || workers_.empty()) {  // small: a thread hand-off costs more than it saves
    std::memcpy(dst, src, n);
    return;
  }
  std::shared_ptr<job> j = enqueue(dst, src, n, streaming, nullptr, nullptr, true);
  // The caller copies parts of its own job too.
  for (;;) {
    std::size_t part;
    {
      std::lock_guard lock(crew_->mutex);
      if (j->next >= j->parts) break;
      part = j->next++;
      if (j->next == j->parts && !crew_->jobs.empty() && crew_->jobs.front() == j) crew_->jobs.pop_front();
    }
    copy_part(*j, part);
    finish_part(j);
  }
  std::unique_lock lock(j->mutex);
  j->finished_cv.wait(lock, [&] { return j->finished; });
}

bool memcpy_team::help_one() noexcept {
  const std::shared_ptr<crew> c = crew_;  // done() may destroy the team: what is used after it is held here
  std::shared_ptr<job> j;
  std::size_t part = 0;
  {
    std::lock_guard lock(c->mutex);
    if (!claim_locked(*c, j, part)) return false;
  }
  copy_part(*j, part);
  finish_part(j);
  return true;
}

void memcpy_team::submit(void* dst, const void* src, std::size_t n, bool streaming, std::function<void()> done) {
  enqueue(dst, src, n, streaming, std::move(done), nullptr, false);
}

void memcpy_team::submit_timed(void* dst, const void* src, std::size_t n, bool streaming,
                               std::function<void(std::chrono::nanoseconds)> done) {
  enqueue(dst, src, n, streaming, nullptr, std::move(done), false);
}

}  // namespace cuasync::runtime
