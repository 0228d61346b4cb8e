// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Names of categories and lane kinds (the Chrome JSON's "cat" and lane arguments), lane order and default lane names.
#include <cuasync/trace/span.hpp>

#include <array>
#include <tuple>

namespace cuasync::trace {
namespace {
constexpr std::array<std::string_view, category_count> category_names = {
    "launch", "copy", "memset", "alloc", "staged_copy_chunk", "pipeline_stage",
    "await",  "jit_compile", "jit_cache_hit", "sync", "collective", "module_load", "user"};
constexpr std::array<std::string_view, flag::count> flag_names = {
    "pageable_host", "legacy_stream", "blocking_stream", "device_wide", "fills_device", "host_wait", "stream_ordered"};
constexpr std::array<std::string_view, 6> lane_kind_names = {"stream", "h2d", "d2h", "d2d", "p2p", "thread"};

// An enum's name by its value (out-of-range values, read from a corrupt record, get `fallback`), and back.
template <class Enum, std::size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, Enum e, std::string_view fallback) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : fallback;
}
template <class Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::string_view, N>& names, std::string_view name) noexcept {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<Enum>(i);
  return std::nullopt;
}

// Host threads after every device; within a device, the copy directions before the streams.
int kind_rank(lane_kind k) noexcept { return k == lane_kind::stream ? 10 : static_cast<int>(k); }
}  // namespace

std::string_view to_string(category c) noexcept { return name_of(category_names, c, "user"); }
std::optional<category> category_from_string(std::string_view name) noexcept {
  return value_of<category>(category_names, name);
}
std::string_view flag_name(int bit) noexcept {
  return bit >= 0 && bit < flag::count ? flag_names[static_cast<std::size_t>(bit)] : std::string_view{};
}
std::string_view to_string(lane_kind k) noexcept { return name_of(lane_kind_names, k, "thread"); }
std::optional<lane_kind> lane_kind_from_string(std::string_view name) noexcept {
  return value_of<lane_kind>(lane_kind_names, name);
}

bool operator<(const lane& a, const lane& b) noexcept {
  const bool a_host = a.kind == lane_kind::host_thread, b_host = b.kind == lane_kind::host_thread;
  return std::tuple(a_host, a.device, kind_rank(a.kind), a.id) < std::tuple(b_host, b.device, kind_rank(b.kind), b.id);
}

std::string default_lane_name(const lane& l) {
  const std::string gpu = " (GPU " + std::to_string(l.device) + ")";
  switch (l.kind) {
    case lane_kind::stream: return "stream " + std::to_string(l.id) + gpu;
    case lane_kind::copy_h2d: return "H2D" + gpu;
    case lane_kind::copy_d2h: return "D2H" + gpu;
    case lane_kind::copy_d2d: return "D2D" + gpu;
    case lane_kind::copy_p2p: return "P2P" + gpu;
    case lane_kind::host_thread: break;
  }
  return "thread " + std::to_string(l.id);
}

}  // namespace cuasync::trace
