// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Hazard-tracked device buffers (stream-ordered memory, safe reuse and free across streams). A `tracked_buffer`
//! remembers the last write and the reads since, per stream. A launch or copy through runtime/ that uses it on another
//! stream first makes that stream wait (device-side, `cuStreamWaitEvent`; the host never waits). Freeing is
//! stream-ordered on the buffer's home stream after every other stream that used it. Single-stream use records no
//! events at all: an event is recorded on a stream only when another stream has to wait for it — lazily, at that later
//! use or at the free. So every stream that used a buffer must outlive the buffer (the home stream and the others): a
//! stream destroyed first makes that record fail (`CUDA_ERROR_INVALID_HANDLE`) or, once its handle belongs to a new
//! stream, order after the wrong work. The device's runtime (its primary context) must outlive its buffers and streams
//! too.

#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace cuasync::runtime {

class device_runtime;

enum class access { read, write, read_write };

//! A device buffer from the device's stream-ordered pool whose uses are tracked per stream. Move-only.
class tracked_buffer {
 public:
  tracked_buffer() = default;
  //! Allocates `bytes` on `home` (stream-ordered, from the device's pool). @throws cuda_error
  static tracked_buffer allocate(device_runtime& rt, stream_ref home, std::size_t bytes,
                                 std::source_location where = std::source_location::current());

  tracked_buffer(tracked_buffer&& o) noexcept { *this = std::move(o); }
  tracked_buffer& operator=(tracked_buffer&& o) noexcept;
  tracked_buffer(const tracked_buffer&) = delete;
  tracked_buffer& operator=(const tracked_buffer&) = delete;
  //! Enqueues the free on the home stream after waits on every other stream that used the buffer. Never throws
  //! (a failure is deferred to the context, see `context_ref::take_deferred_error`).
  ~tracked_buffer();

  CUdeviceptr get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return size_; }
  device_span span() const noexcept { return {ptr_, size_}; }
  template <class T>
  T* data() const noexcept { return span().as<T>(); }
  stream_ref home() const noexcept { return home_; }
  //! The context (device) the memory belongs to.
  context_ref context() const noexcept { return home_.context(); }
  explicit operator bool() const noexcept { return ptr_ != 0; }

  //! Turns tracking off (or on again) for code that manages its own dependencies. While off, accesses insert no
  //! waits and are not remembered; the free still waits for the uses remembered before.
  void set_tracking(bool on) noexcept { tracking_ = on; }
  bool tracking() const noexcept { return tracking_; }

  //! Makes `s` wait for the uses that conflict with `a` (a read waits for the last write; a write waits for the last
  //! write and every read) and remembers this use. Called by runtime/'s launches and copies before they enqueue.
  //! @throws cuda_error
  void use(stream_ref s, access a, std::source_location where = std::source_location::current());

 private:
  struct stream_use {
    stream_ref stream;
    pooled_event after;  // recorded lazily: only when another stream must wait
  };
  void wait_for(stream_ref s, stream_use& u, std::source_location where);
  void free_nothrow() noexcept;

  std::shared_ptr<event_pool> events_;
  stream_ref home_;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  bool tracking_ = true;
  // Uses are short critical sections on the launch path: a spin lock costs less than a mutex (no allocation, one
  // atomic exchange uncontended).
  class spin_lock {
   public:
    void lock() noexcept {
      while (flag_.test_and_set(std::memory_order_acquire)) flag_.wait(true, std::memory_order_relaxed);
    }
    void unlock() noexcept {
      flag_.clear(std::memory_order_release);
      flag_.notify_one();
    }

   private:
    std::atomic_flag flag_;
  };
  spin_lock lock_;
  std::optional<stream_use> last_write_;
  std::vector<stream_use> reads_;  // one entry per stream
  std::vector<stream_use> others_;  // every stream other than home that ever used it: the free waits for them all
};

//! Argument wrappers for `runtime::launch`: the kernel receives the buffer's address, and the launch is ordered
//! after the conflicting uses on other streams.
struct buffer_access {
  using is_tracked_access = void;
  tracked_buffer* buffer;
  access mode;
};
inline buffer_access reads(tracked_buffer& b) noexcept { return {&b, access::read}; }
inline buffer_access writes(tracked_buffer& b) noexcept { return {&b, access::write}; }
inline buffer_access read_writes(tracked_buffer& b) noexcept { return {&b, access::read_write}; }

}  // namespace cuasync::runtime
