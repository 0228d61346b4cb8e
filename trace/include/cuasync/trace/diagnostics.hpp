// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The troubleshooting checklist, automated: what in a recorded timeline serialized the GPU or stalled the host, each
//! finding with a plain explanation and the fix. Reads only the timeline (spans with their flags and addresses, and
//! the devices' facts), so `cuasync trace` diagnoses a trace recorded elsewhere.

#include <cuasync/trace/timeline.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync::trace {

//! What a finding is about.
enum class diagnostic {
  pageable_copy,              //!< an asynchronous copy to or from pageable host memory
  default_stream_serialization,  //!< work on the legacy default stream, or on blocking streams beside it
  device_synchronize,         //!< a device-wide synchronization inside the traced region
  copies_not_overlapped,      //!< copies that never overlapped though the device has >= 2 copy engines
  kernel_filled_device,       //!< a kernel that filled every SM, so work of other streams waited for it
  host_wait,                  //!< the host waited on an event or stream, then issued dependent work
  allocation_on_hot_path,     //!< synchronous allocations or frees between GPU work
  buffer_reused_in_flight,    //!< a buffer written while another stream's operation on it was in flight
  host_bound_pipeline,        //!< the GPU idle while host stages ran: the host is the pipeline's slowest stage
  gpu_idle_round_trip,        //!< the GPU idle between two operations while the host waited for one to issue the next
  too_few_slots,              //!< fewer requests in flight than cycle / bound, so the GPU ran out of work
};
inline constexpr int diagnostic_count = 11;

//! "pageable_copy", ...: the id in the JSON and in the tests.
std::string_view to_string(diagnostic d) noexcept;

//! Where a finding happened: a span it concerns (its lane and times), for the HTML page's markers on the lanes.
struct finding_place {
  trace::lane lane;
  std::int64_t begin_ns = 0, end_ns = 0;
  friend bool operator==(const finding_place&, const finding_place&) = default;
};
//! The most places a finding keeps (its occurrences may be many more).
inline constexpr std::size_t max_finding_places = 1000;

struct finding {
  diagnostic kind = diagnostic::pageable_copy;
  std::size_t occurrences = 0;        //!< how many spans (or pairs of spans) showed it
  std::string summary;                //!< one line: what happened, with counts and times
  std::string explanation;            //!< why it costs (plain words)
  std::string fix;                    //!< what to change
  std::vector<std::string> examples;  //!< a few of the spans concerned: name, lane, time, label
  std::vector<finding_place> places;  //!< the spans concerned, in the order found (at most max_finding_places)
};

//! Every diagnostic that fires on `t` (normalized or not), in the order of `diagnostic`. Empty for a clean trace.
std::vector<finding> diagnose(const timeline& t);

//! A human-readable report ("no findings" when empty).
std::string to_text(const std::vector<finding>& findings);
//! A JSON array of objects: id, occurrences, summary, explanation, fix, examples.
std::string to_json(const std::vector<finding>& findings);

}  // namespace cuasync::trace
