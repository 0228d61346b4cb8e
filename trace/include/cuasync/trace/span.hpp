// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! What the recorder records: a span (an interval of time) on a lane (a row of the timeline), with a category,
//! a name, the user label that was current when it was issued, and the bytes moved for copies.
//!
//! Every time is in nanoseconds on one clock, the host's `std::chrono::steady_clock` (trace::now_ns()). Spans
//! measured on the GPU (by timing events) are converted to that clock before they are recorded
//! (trace::gpu_clock_map), so host and GPU spans share one axis; `span::clock` says which kind a span is.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cuasync::trace {

//! What kind of work a span is. The overlap summary counts `launch` spans on stream lanes as compute, and every
//! span on the H2D and D2H lanes as copies.
enum class category : std::uint8_t {
  launch,             //!< a kernel (GPU time on its stream's lane; host issue time on a thread lane)
  copy,               //!< a copy (on its direction's lane)
  memset,             //!< a memset on a stream
  alloc,              //!< an allocation or free (device, pinned, pool)
  staged_copy_chunk,  //!< one chunk of a staged pageable copy (its DMA on the direction's lane)
  pipeline_stage,     //!< a stage of a slot pipeline (preprocess, postprocess, ...)
  await,              //!< from an awaited operation's start to its completion being seen
  jit_compile,        //!< an NVRTC compile
  jit_cache_hit,      //!< a compile answered by the memory or disk cache
  sync,               //!< a host-blocking wait (synchronize, a blocking copy)
  collective,         //!< an NCCL collective or send/recv (GPU time on its stream's lane)
  module_load,        //!< a module loaded into a context (the driver may JIT-compile PTX there)
  user,               //!< a span of the application's own (trace::scope with a name of its choosing)
};
inline constexpr int category_count = 13;

//! "launch", "copy", ..., "jit_cache_hit", "sync", "collective", "module_load", "user": the names the Chrome JSON's "cat" field carries.
std::string_view to_string(category c) noexcept;
//! The category named `name`, or nothing for an unknown name.
std::optional<category> category_from_string(std::string_view name) noexcept;

//! The kind of row a span is drawn on.
enum class lane_kind : std::uint8_t {
  stream,       //!< one per stream (id: the stream's `cuStreamGetId`, unique in the process; handles are reused)
  copy_h2d,     //!< one per device and copy direction (the copy engines' view, whatever stream issued the copy)
  copy_d2h,
  copy_d2d,
  copy_p2p,     //!< peer copies, on the lane of the device whose stream issued them
  host_thread,  //!< one per host thread (id: a small ordinal, see trace::this_thread_lane())
};

//! "stream", "h2d", "d2h", "d2d", "p2p", "thread".
std::string_view to_string(lane_kind k) noexcept;
std::optional<lane_kind> lane_kind_from_string(std::string_view name) noexcept;

//! A row of the timeline. Host thread lanes have device -1.
struct lane {
  lane_kind kind = lane_kind::host_thread;
  int device = -1;
  std::uint64_t id = 0;  //!< the stream id, the thread ordinal, or 0 for copy lanes

  static lane stream(int device, std::uint64_t stream_id) noexcept { return {lane_kind::stream, device, stream_id}; }
  static lane copy(int device, lane_kind direction) noexcept { return {direction, device, 0}; }
  static lane host_thread(std::uint64_t ordinal) noexcept { return {lane_kind::host_thread, -1, ordinal}; }

  bool is_copy() const noexcept { return kind >= lane_kind::copy_h2d && kind <= lane_kind::copy_p2p; }
  friend bool operator==(const lane&, const lane&) = default;
  //! Devices in order, then host threads; within a device copy lanes (H2D, D2H, D2D, P2P), then streams by id.
  friend bool operator<(const lane& a, const lane& b) noexcept;
};

//! "stream 7 (GPU 0)", "H2D (GPU 0)", "thread 2": what a lane is called when nobody named it.
std::string default_lane_name(const lane& l);

//! Where a span's times come from.
enum class clock_source : std::uint8_t {
  host,        //!< read with trace::now_ns() on the host
  gpu_events,  //!< measured by timing events on the GPU, converted to the host clock (trace::gpu_clock_map)
};

//! Facts about how a span's operation was issued, for the diagnostics (trace/diagnostics.hpp): bits of span::flags.
namespace flag {
inline constexpr std::uint32_t pageable_host = 1u << 0;    //!< a copy to or from pageable (not page-locked) host memory
inline constexpr std::uint32_t legacy_stream = 1u << 1;    //!< issued on the legacy default stream (NULL, CU_STREAM_LEGACY)
inline constexpr std::uint32_t blocking_stream = 1u << 2;  //!< issued on a stream made without CU_STREAM_NON_BLOCKING
inline constexpr std::uint32_t device_wide = 1u << 3;      //!< a `sync` span that waited for a whole context/device
inline constexpr std::uint32_t fills_device = 1u << 4;     //!< a launch whose grid alone fills every SM at its occupancy
inline constexpr std::uint32_t host_wait = 1u << 5;        //!< a `sync` span: the host waited on one stream or event
inline constexpr std::uint32_t stream_ordered = 1u << 6;   //!< an `alloc` span that is stream-ordered (a pool): not a stall
inline constexpr int count = 7;
}  // namespace flag

//! "pageable_host", "legacy_stream", ...: the names the Chrome JSON's "flags" array carries (bit i: names()[i]).
std::string_view flag_name(int bit) noexcept;

//! One recorded interval. `end_ns` >= `begin_ns` (the recorder swaps them otherwise).
struct span {
  trace::lane lane;
  trace::category category = category::user;
  trace::clock_source clock = clock_source::host;
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::uint64_t bytes = 0;      //!< bytes moved (copies, memsets, staged chunks, allocations); 0 otherwise
  std::uint64_t stream_id = 0;  //!< the stream that issued a span on a copy lane (0: unknown or not a copy)
  std::uint64_t src = 0;        //!< the address read (copies; 0: unknown or none)
  std::uint64_t dst = 0;        //!< the address written (copies, memsets; 0: unknown or none), `bytes` long
  std::uint32_t flags = 0;      //!< trace::flag bits
  //! The same nonzero id on a host issue span (the launch or copy call on its thread's lane) and on the GPU span
  //! it issued, given when both are recorded (trace::new_flow_id()); 0: not linked. The Chrome JSON draws it as a
  //! flow arrow from the call to the work.
  std::uint64_t flow = 0;
  std::string name;             //!< kernel name, "cuMemcpyHtoDAsync", "stage 2", ...
  std::string label;            //!< the issuing thread's trace::label (joined with " / " when nested)

  std::int64_t duration_ns() const noexcept { return end_ns - begin_ns; }
  friend bool operator==(const span&, const span&) = default;
};

}  // namespace cuasync::trace
