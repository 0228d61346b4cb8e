// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! A recorded timeline: what the recorder hands out (trace::snapshot()), what the exporters write and the JSON
//! reader gives back. A plain value: build one by hand to test an exporter or the overlap summary.

#include <cuasync/trace/span.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cuasync::trace {

//! A lane and the name it is shown with.
struct lane_info {
  trace::lane lane;
  std::string name;
  friend bool operator==(const lane_info&, const lane_info&) = default;
};

//! What the diagnostics need to know of a GPU the timeline ran on (recorded once per device by the hooks).
struct device_info {
  int device = 0;
  std::string name;
  int multiprocessors = 0;
  int copy_engines = 0;  //!< CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
  friend bool operator==(const device_info&, const device_info&) = default;
};

struct timeline {
  //! Sorted by begin time, then lane (after normalize()).
  std::vector<span> spans;
  //! Every lane that has a span, plus any that was named, in lane order (after normalize()).
  std::vector<lane_info> lanes;
  //! Records refused because the recorder's cap was reached: the timeline is incomplete when this is not 0.
  std::uint64_t dropped = 0;
  //! The GPUs that spans ran on, by device ordinal (what trace::describe_device() was told).
  std::vector<device_info> devices;
  //! The device's facts, or nullptr when nobody described it.
  const device_info* device(int ordinal) const noexcept;
  //! The id of the process that recorded it (getpid(), set by trace::snapshot()); 0: unknown (built by hand, or
  //! read from a file that does not say). The Chrome JSON gives it to the host's events.
  std::int64_t pid = 0;
  //! The host time shown as 0 (when recording was enabled). The exporters write times relative to it.
  std::int64_t origin_ns = 0;

  //! The lane's name: the one in `lanes`, else default_lane_name().
  std::string lane_name(const lane& l) const;
  //! Sorts the spans, adds a lane_info (with its default name) for each lane that has spans and none, sorts `lanes`
  //! and keeps the first of duplicate lanes. The exporters and the overlap summary take normalized timelines.
  void normalize();
  //! The first begin and the last end of all spans (0, 0 without spans).
  std::int64_t first_begin_ns() const noexcept;
  std::int64_t last_end_ns() const noexcept;
};

}  // namespace cuasync::trace
