#pragma once
//! @file Staged pageable copies. The driver copies ordinary (pageable) host memory at 8 GB/s H2D and 14–15 GB/s D2H
//! on the H200 against 55 GB/s pinned. `staged_copier` moves pageable data through a ring of pinned chunks: a team
//! of threads copies chunk i+1 on the host while the DMA of chunk i runs (measured: ~40 GB/s H2D, ~35-50 GB/s D2H).

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/runtime/memcpy_team.hpp>

#include <cstddef>
#include <mutex>
#include <span>
#include <vector>

namespace cuasync::runtime {

struct staged_copy_options {
  //! Pinned chunk size. On the H200 machine 8 MiB chunks moved 1 GiB D2H at 52 GB/s against 39 GB/s with 4 MiB
  //! (bench/runtime measures the alternative side by side).
  std::size_t chunk_bytes = std::size_t{8} << 20;
  std::size_t chunks = 4;                          //!< chunks in the ring
  unsigned threads = 0;                            //!< host copy threads, caller included; 0 = 3/4 of cores, ≤ 12
  //! Non-temporal stores into the pinned ring: on the H200 machine 43 GB/s against 25 GB/s with regular stores at
  //! 64 MiB (bench/runtime measures both side by side).
  bool h2d_streaming_stores = true;
  //! Non-temporal stores into the pageable destination for copies of at least this many bytes (0: always; SIZE_MAX:
  //! never). On the H200 machine they were slower at 64 MiB (0.89-0.91x of regular stores) and faster at 1 GiB
  //! (1.28-1.45x: a destination that large is not in the cache anyway, and they skip its read-for-ownership).
  std::size_t d2h_streaming_from_bytes = std::size_t{256} << 20;
};

//! Copies between pageable host memory and the device through pinned staging. Thread-safe (one copy at a time per
//! copier; copies from several threads queue on a lock).
class staged_copier {
 public:
  //! Allocates the pinned ring (chunks × chunk_bytes) and starts the copy threads. @throws cuda_error
  staged_copier(context_ref ctx, staged_copy_options options = {});

  //! Host to device, in stream order on `s`. Host-blocking until all of `src` has been copied into pinned staging:
  //! when it returns, `src` may be reused; the device copy completes in stream order (wait on `s`).
  //! @throws cuda_error (bad sizes, as for `cuasync::copy_async`)
  void copy_to_device(stream_ref s, device_span dst, std::span<const std::byte> src);
  //! Device to host, in stream order on `s`. Host-blocking until `dst` holds the data (like the driver's pageable
  //! copy): the work before it on `s` is waited for. @throws cuda_error (including device errors)
  void copy_to_host(stream_ref s, std::span<std::byte> dst, device_span src);

  const staged_copy_options& options() const noexcept { return options_; }

 private:
  std::byte* chunk(std::size_t i) const noexcept {
    return ring_.data<std::byte>() + (i % options_.chunks) * options_.chunk_bytes;
  }
  void wait_slot(std::size_t i);

  context_ref ctx_;
  staged_copy_options options_;
  pinned_buffer ring_;
  std::vector<event> slot_done_;   // the last DMA that used each slot
  std::vector<bool> slot_busy_;
  memcpy_team team_;
  std::mutex mutex_;
};

}  // namespace cuasync::runtime
