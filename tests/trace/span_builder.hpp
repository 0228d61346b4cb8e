// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Hand-made timelines for the diagnostics' tests: spans as the library's hooks record them (a GPU span on a stream
// or copy lane, the host's issue span on a thread lane), times in microseconds.
#include <cuasync/trace/diagnostics.hpp>

#include <algorithm>
#include <string>

namespace cuasync::trace::test {

inline constexpr std::int64_t us = 1'000;

struct span_builder {
  timeline t;

  span& add(lane l, category c, std::string name, std::int64_t begin_us, std::int64_t end_us, std::uint32_t flags = 0) {
    span s;
    s.lane = l;
    s.category = c;
    s.clock = l.kind == lane_kind::host_thread ? clock_source::host : clock_source::gpu_events;
    s.begin_ns = begin_us * us;
    s.end_ns = end_us * us;
    s.name = std::move(name);
    s.flags = flags;
    t.spans.push_back(std::move(s));
    return t.spans.back();
  }
  // A kernel as the GPU ran it, on its stream's lane of GPU 0.
  span& kernel(std::uint64_t stream, std::string name, std::int64_t begin_us, std::int64_t end_us,
               std::uint32_t flags = 0) {
    return add(lane::stream(0, stream), category::launch, std::move(name), begin_us, end_us, flags);
  }
  // A copy on GPU 0's lane for `direction`, issued on `stream`.
  span& copy(lane_kind direction, std::uint64_t stream, std::int64_t begin_us, std::int64_t end_us,
             std::uint64_t bytes = 1 << 20, std::uint32_t flags = 0) {
    const char* name = direction == lane_kind::copy_h2d ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    span& s = add(lane::copy(0, direction), category::copy, name, begin_us, end_us, flags);
    s.bytes = bytes;
    s.stream_id = stream;
    return s;
  }
  // The host's issue of GPU work on `stream` (what a launch or copy records on the calling thread's lane).
  span& issue(std::uint64_t thread, category c, std::uint64_t stream, std::string name, std::int64_t begin_us,
              std::int64_t end_us, std::uint32_t flags = 0) {
    span& s = add(lane::host_thread(thread), c, std::move(name), begin_us, end_us, flags);
    s.stream_id = stream;
    return s;
  }
  // A host call (a synchronize, an allocation) on a thread's lane.
  span& host(std::uint64_t thread, category c, std::string name, std::int64_t begin_us, std::int64_t end_us,
             std::uint32_t flags = 0) {
    return add(lane::host_thread(thread), c, std::move(name), begin_us, end_us, flags);
  }

  std::vector<finding> diagnose() const { return trace::diagnose(t); }
};

// The finding of that kind among `fs`, or nullptr. Keep `fs` alive while the pointer is used (a pointer into
// b.diagnose()'s temporary dangles after the full expression).
inline const finding* find_kind(const std::vector<finding>& fs, diagnostic d) {
  auto it = std::find_if(fs.begin(), fs.end(), [&](const finding& f) { return f.kind == d; });
  return it == fs.end() ? nullptr : &*it;
}

// Whether any of the finding's examples (or its summary) names `text`.
inline bool names(const finding& f, const std::string& text) {
  if (f.summary.find(text) != std::string::npos) return true;
  return std::any_of(f.examples.begin(), f.examples.end(),
                     [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

}  // namespace cuasync::trace::test
