// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Which stores the copy threads use for a staged copy's host side: regular ones, or non-temporal ("streaming")
//! ones, which skip the read-for-ownership of every destination line and keep it out of the caches. Which is faster
//! depends on the machine and on the copy's size, and measurements on one machine disagree between runs: on the
//! H200 machine regular stores were 1.13-1.26x faster at 1 GiB both ways, D2H faster at 64 MiB too, and H2D at
//! 64 MiB once 1.13x faster with streaming stores, once 1.17x slower (bench/results/runtime.md). `automatic`
//! measures: the first chunks of copies of each size class are copied both ways, alternately, and timed on the copy
//! threads; the faster kind is kept for that size class from then on. It times the host copy alone, so it misses
//! what the stores cost the DMA beside them (memory bandwidth): on an H100 it chose streaming stores for 1 GiB H2D
//! in some processes, 44 GB/s where regular stores gave 51-53. Staged copies default to regular stores
//! (staged_copy_options).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace cuasync::runtime {

//! The stores of a staged copy's host side.
enum class store_kind : std::uint8_t {
  automatic,  //!< measured per size class (store_chooser)
  regular,
  streaming,  //!< non-temporal
};

//! Chooses the store kind of each chunk by measurement. Thread-safe.
class store_chooser {
 public:
  //! Timed chunks of each kind a size class needs before it decides.
  static constexpr int samples_per_kind = 4;
  //! Chunks smaller than this are never timed (their time is mostly hand-off).
  static constexpr std::size_t smallest_sample = std::size_t{1} << 20;

  explicit store_chooser(store_kind kind = store_kind::automatic) noexcept : kind_(kind) {}

  //! The next chunk's stores for a copy of `copy_bytes`: `sample` says to time its host copy and `report` it.
  struct pick {
    bool streaming = false;
    bool sample = false;
  };
  pick next(std::size_t copy_bytes, std::size_t chunk_bytes) noexcept;
  //! A timed chunk's result.
  void report(std::size_t copy_bytes, bool streaming, std::size_t bytes, std::chrono::nanoseconds t) noexcept;
  //! What copies of `copy_bytes` use when they time nothing (a copy through one whole block): the decided kind, or
  //! regular stores until there is one.
  bool streaming(std::size_t copy_bytes) const noexcept;
  //! For tests and the bench: 0 undecided, 1 regular, 2 streaming.
  int decision(std::size_t copy_bytes) const noexcept;

 private:
  struct size_class {
    int decided = 0;                 // 0: not yet; 1: regular; 2: streaming
    std::array<int, 2> issued{};     // timed chunks handed out, [regular, streaming]
    std::array<int, 2> reported{};
    std::array<double, 2> ns{}, bytes{};
  };
  static std::size_t class_of(std::size_t copy_bytes) noexcept;

  store_kind kind_;
  mutable std::mutex mutex_;
  std::array<size_class, 16> classes_{};  // by log2 of the copy's size: below 2 MiB, ..., 32 GiB and more
};

}  // namespace cuasync::runtime
