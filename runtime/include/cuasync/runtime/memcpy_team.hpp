#pragma once
//! @file `memcpy_team`: a few persistent threads that split one host `memcpy` between them. One thread copies
//! ~10 GB/s on the H200 machine; eight reach ~31 GB/s — what staged pageable copies need.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace cuasync::runtime {

class memcpy_team {
 public:
  //! `threads` copying threads in all, the caller included (so `threads - 1` are started); 0 picks
  //! 3/4 of the hardware threads, at most 12.
  explicit memcpy_team(unsigned threads = 0);
  memcpy_team(const memcpy_team&) = delete;
  memcpy_team& operator=(const memcpy_team&) = delete;
  ~memcpy_team();

  //! Copies `n` bytes, split across the team; returns when all of it is copied. One copy at a time per team.
  //! `streaming`: non-temporal stores (no read-for-ownership of the destination, which also stays out of the cache).
  void copy(void* dst, const void* src, std::size_t n, bool streaming = false);
  unsigned size() const noexcept { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  void work(unsigned index);
  void copy_part(unsigned part);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::uint64_t generation_ = 0;  // a new job; guarded by mutex_
  bool stopping_ = false;
  std::atomic<unsigned> remaining_{0};
  // The current job (written before generation_ is bumped).
  std::byte* dst_ = nullptr;
  const std::byte* src_ = nullptr;
  std::size_t n_ = 0;
  bool streaming_ = false;
};

}  // namespace cuasync::runtime
