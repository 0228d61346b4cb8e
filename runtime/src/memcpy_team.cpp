#include <cuasync/runtime/memcpy_team.hpp>

#include <algorithm>
#include <cstdint>
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

memcpy_team::memcpy_team(unsigned threads) {
  // Host memcpy bandwidth grows with threads up to ~12 on the H200 machine's 16 cores; leave some cores to the rest.
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency() * 3 / 4, 1u, 12u);
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

memcpy_team::~memcpy_team() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void memcpy_team::copy_part(unsigned part) {
  // Parts are whole 4 KiB pages where possible, so two threads never share a page.
  const std::size_t parts = size();
  const std::size_t per = ((n_ / parts) + 4095) & ~std::size_t{4095};
  const std::size_t begin = std::min(n_, per * part);
  const std::size_t end = part + 1 == parts ? n_ : std::min(n_, begin + per);
  if (end <= begin) return;
  if (streaming_)
    copy_streaming(dst_ + begin, src_ + begin, end - begin);
  else
    std::memcpy(dst_ + begin, src_ + begin, end - begin);
}

void memcpy_team::work(unsigned index) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    copy_part(index);
    remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void memcpy_team::copy(void* dst, const void* src, std::size_t n, bool streaming) {
  if (n < (std::size_t{256} << 10) || workers_.empty()) {  // small: a thread hand-off costs more than it saves
    std::memcpy(dst, src, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    dst_ = static_cast<std::byte*>(dst);
    src_ = static_cast<const std::byte*>(src);
    n_ = n;
    streaming_ = streaming;
    remaining_.store(static_cast<unsigned>(workers_.size()), std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
  copy_part(0);
  while (remaining_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

}  // namespace cuasync::runtime
