// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The library's instrumentation switch: one word of bits that every hook reads first — the recorder
//! (trace::enable), NVTX ranges for Nsight (trace::set_nvtx), the blocked-call registry the io-thread watchdog
//! reads (trace::set_watch) and the flight recorder (flight_recorder.hpp). All off: a hook costs one relaxed load and a branch.
//!
//! `host_call` brackets a host-side driver call that may block (a free, an allocation, a synchronize, a pageable
//! copy): with recording on it records a host span on the calling thread's lane; with NVTX on it pushes and pops a
//! range; with watching on it publishes "this thread is inside <call> since <t>, called from <where>" for the
//! watchdog (trace/blocking_calls.hpp) to read from another thread while the call blocks.

#include <cuasync/trace/span.hpp>

#include <atomic>
#include <cstdint>
#include <source_location>

namespace cuasync::trace {

//! The bits of the instrumentation word.
namespace hook {
inline constexpr std::uint32_t record = 1u << 0;  //!< the recorder records spans
inline constexpr std::uint32_t nvtx = 1u << 1;    //!< NVTX ranges on library operations
inline constexpr std::uint32_t watch = 1u << 2;   //!< blocking calls are published for the watchdog
inline constexpr std::uint32_t flight = 1u << 3;  //!< operations go into the flight recorder (flight_recorder.hpp)
}  // namespace hook

namespace detail {
//! Constant-initialized, so valid before any static constructor runs.
extern std::atomic<std::uint32_t> hooks;
}  // namespace detail

//! The instrumentation bits in force: the first thing every hook reads.
inline std::uint32_t active_hooks() noexcept { return detail::hooks.load(std::memory_order_relaxed); }

//! NVTX ranges on library operations (launches, copies, allocations, synchronizations, compiles). On by default when
//! a tool is attached (NVTX_INJECTION64_PATH is set, as Nsight Systems sets it) or CUASYNC_NVTX=1; off otherwise.
void set_nvtx(bool on) noexcept;
//! Publishing blocking calls for the watchdog (set by async_io's io_watchdog while one runs).
void set_watch(bool on) noexcept;
//! The flight recorder's bit (set by flight::enable and flight::disable).
void set_flight(bool on) noexcept;

//! Only the watch bit, when it is on: for a host_call that publishes a blocking call to the watchdog and records no
//! span (a call another hook records, or one the timeline has no category for).
inline std::uint32_t watch_only() noexcept { return active_hooks() & hook::watch; }

class host_call;
namespace detail {
struct host_call_state;  // what an active host_call holds (span, NVTX, the published call)
void start_host_call(host_call& c, std::uint32_t bits, category cat, const char* call, std::uint64_t bytes,
                     std::uint32_t flags, const std::source_location* where) noexcept;
void finish_host_call(host_call& c) noexcept;
}  // namespace detail

//! Brackets a host-side call that may block or allocate. `call` must be a string literal (it is kept by pointer:
//! "cuMemFree", "cuStreamSynchronize"); `where` is the library caller's location when known.
class host_call {
 public:
  host_call(category cat, const char* call, std::uint64_t bytes = 0, std::uint32_t flags = 0,
            const std::source_location* where = nullptr) noexcept {
    if (const std::uint32_t bits = active_hooks() & ~hook::flight) [[unlikely]]  // the recorder keeps enqueues only
      detail::start_host_call(*this, bits, cat, call, bytes, flags, where);
  }
  //! Only the instrumentation in `bits` (a hook that records its own span and wants only the watch, say).
  host_call(std::uint32_t bits, category cat, const char* call, std::uint64_t bytes = 0, std::uint32_t flags = 0,
            const std::source_location* where = nullptr) noexcept {
    if (bits) detail::start_host_call(*this, bits, cat, call, bytes, flags, where);
  }
  ~host_call() {
    if (state_) [[unlikely]] detail::finish_host_call(*this);
  }
  host_call(const host_call&) = delete;
  host_call& operator=(const host_call&) = delete;

 private:
  friend void detail::start_host_call(host_call&, std::uint32_t, category, const char*, std::uint64_t, std::uint32_t,
                                      const std::source_location*) noexcept;
  friend void detail::finish_host_call(host_call&) noexcept;
  detail::host_call_state* state_ = nullptr;  // owned; only while instrumented (a raw pointer keeps the type opaque)
};

}  // namespace cuasync::trace
