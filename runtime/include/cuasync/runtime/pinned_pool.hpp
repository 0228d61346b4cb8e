// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `pinned_pool`: a caching allocator of pinned host memory. `cuMemHostAlloc` costs milliseconds for large
//! sizes and must stay off hot paths; the pool keeps freed blocks by size class and hands them out again
//! — but a block the user freed is reused only after the GPU work that used it has completed.

#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace cuasync::runtime {

//! A block of the runtime's pinned memory (the pool's, the staging ring's): `pinned_buffer::allocate_registered`
//! (host memory allocated and touched outside the driver, then registered), whose allocation holds up other threads'
//! driver calls ~10x shorter than a `cuMemHostAlloc`, which keeps them all out while it runs (H100: 64-68 ms for
//! 128 MiB, registration 4-10 ms; the C ABI's cold pageable copy calls 0.6 ms instead of 48-97 ms:
//! bench/results/h100-session23). `CUASYNC_PINNED_BY_REGISTRATION=0` in the environment (read once) makes them by
//! `pinned_buffer::allocate`, as does a driver that refuses registration (CUDA_ERROR_NOT_SUPPORTED or
//! CUDA_ERROR_NOT_PERMITTED: from then on, for the process). @throws cuda_error
pinned_buffer allocate_pinned_block(context_ref ctx, std::size_t bytes,
                                    std::source_location where = std::source_location::current());
//! Whether `allocate_pinned_block` makes its blocks by registration now.
bool pinned_blocks_registered() noexcept;

class pinned_pool;

//! Counters of a `pinned_pool`.
struct pinned_pool_stats {
  std::size_t hits = 0;           //!< allocations served from cached blocks
  std::size_t misses = 0;         //!< allocations that called cuMemHostAlloc
  std::size_t bytes_in_use = 0;   //!< held by live `pinned_block`s (capacity)
  std::size_t bytes_pending = 0;  //!< freed by the user, still used by GPU work
  std::size_t bytes_idle = 0;     //!< cached, ready for reuse
  std::size_t bytes_reserved = 0; //!< all pinned memory the pool holds
  std::size_t cap = 0;
};

//! A block of pinned memory from a `pinned_pool`. Move-only; returns to the pool when destroyed.
class pinned_block {
 public:
  pinned_block() = default;
  pinned_block(pinned_block&& o) noexcept
      : pool_(std::move(o.pool_)), buffer_(std::move(o.buffer_)), size_(std::exchange(o.size_, 0)),
        uses_(std::move(o.uses_)) {}
  pinned_block& operator=(pinned_block&& o) noexcept;
  pinned_block(const pinned_block&) = delete;
  pinned_block& operator=(const pinned_block&) = delete;
  ~pinned_block();

  void* get() const noexcept { return buffer_.get(); }
  std::size_t size() const noexcept { return size_; }                //!< bytes asked for
  std::size_t capacity() const noexcept { return buffer_.size(); }   //!< the size class
  std::span<std::byte> bytes() const noexcept { return buffer_.bytes().first(size_); }
  template <class T>
  T* data() const noexcept { return static_cast<T*>(buffer_.get()); }
  explicit operator bool() const noexcept { return static_cast<bool>(buffer_); }

  //! Declares that work enqueued on `s` so far reads or writes this block: once freed, it is not handed out again
  //! before that work has completed. runtime/'s copies call this themselves. @throws cuda_error (also for an
  //! empty or moved-from block)
  void record_use(stream_ref s, std::source_location where = std::source_location::current());

 private:
  friend class pinned_pool;
  pinned_block(std::shared_ptr<pinned_pool> pool, pinned_buffer b, std::size_t size)
      : pool_(std::move(pool)), buffer_(std::move(b)), size_(size) {}
  std::shared_ptr<pinned_pool> pool_;
  pinned_buffer buffer_;
  std::size_t size_ = 0;
  std::vector<pooled_event> uses_;
};

//! The caching allocator. Thread-safe. Size classes are powers of two from 4 KiB.
class pinned_pool : public std::enable_shared_from_this<pinned_pool> {
 public:
  //! `cap_bytes`: the most pinned memory the pool may hold (idle, pending and in use together). `context_keeper`
  //! (the context's owner, e.g. a runtime's primary-context retain) is held as long as the pool: blocks keep the
  //! pool, so a block that outlives its runtime keeps its memory (freed with its context otherwise).
  pinned_pool(context_ref ctx, std::shared_ptr<event_pool> events, std::size_t cap_bytes,
              std::shared_ptr<const void> context_keeper = nullptr);
  pinned_pool(const pinned_pool&) = delete;
  pinned_pool& operator=(const pinned_pool&) = delete;
  //! Hands its blocks' frees (`cuMemFreeHost`, which waits for the whole device to be idle) to the reaper, on whichever
  //! thread the last block or owner goes, held there until the context's awaited operations are done
  //! (driver/blocking_free.hpp): never waits for the GPU itself.
  ~pinned_pool();

  //! A block of at least `bytes` (> 0). A hit costs a lock and a vector pop; a miss calls `cuMemHostAlloc` here
  //! (~0.7 ms per MiB: `allocate_async` keeps it off a thread that awaits).
  //! @throws cuda_error(CUDA_ERROR_OUT_OF_MEMORY) when the cap would be exceeded even after freeing idle blocks.
  pinned_block allocate(std::size_t bytes, std::source_location where = std::source_location::current());
  //! A cached block of at least `bytes`, or an empty one when none is idle: never allocates. Never throws.
  pinned_block try_allocate(std::size_t bytes) noexcept;
  //! What `allocate_async` delivers: the block, or an empty one and the failure (`allocate`'s errors).
  using ready_callback = std::function<void(pinned_block, std::exception_ptr)>;
  //! A block of at least `bytes`, without blocking the caller: a hit calls `ready` here, in the call; a miss
  //! allocates on cuasync's background thread and calls `ready` there. At the cap it fails as `allocate` does (it
  //! does not wait for blocks the GPU still uses). @throws std::bad_alloc (nothing started then)
  void allocate_async(std::size_t bytes, ready_callback ready,
                      std::source_location where = std::source_location::current());
  //! Warm-up: allocates a block of each of `sizes` on the background thread and keeps it idle in the pool, so that
  //! later allocations of those sizes hit. Returns at once; a failure (the cap) leaves that size cold.
  void reserve_async(std::vector<std::size_t> sizes);
  //! Warm-up after a miss: unless a block of `bytes`' size class is idle or already being allocated, allocates one on
  //! the background thread and keeps it idle. Returns at once. Never throws (a failure leaves the class cold).
  void warm_async(std::size_t bytes) noexcept;
  //! Frees every idle block (cuMemFreeHost). Pending and in-use blocks are kept.
  void trim();
  pinned_pool_stats stats() const;
  //! The block size that serves `bytes`: a power of two, at least 4 KiB; 0 when none fits in size_t.
  static std::size_t size_class(std::size_t bytes) noexcept;

 private:
  friend class pinned_block;
  struct pending_block {
    pinned_buffer buffer;
    std::vector<pooled_event> uses;
  };
  void give_back(pinned_buffer b, std::vector<pooled_event> uses) noexcept;
  pinned_block take_idle_locked(std::size_t bytes, std::size_t cls);  // a hit, or an empty block
  void collect_completed_locked();  // moves pending blocks whose work is done to idle
  std::vector<pinned_buffer>& idle_for(std::size_t cls);
  void make_room_locked(std::size_t bytes, std::source_location where);

  std::shared_ptr<const void> context_keeper_;  // declared first: released after the buffers below are freed
  context_ref ctx_;
  std::shared_ptr<event_pool> events_;
  mutable std::mutex mutex_;
  std::vector<std::vector<pinned_buffer>> idle_;  // by log2(size class)
  std::vector<pending_block> pending_;
  pinned_pool_stats stats_;
  std::uint64_t warming_ = 0;  // size classes (bit log2) warm_async is allocating
};

}  // namespace cuasync::runtime
