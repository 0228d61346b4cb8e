// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The call-time checks of async_copy_peer (async_copy_peer.hpp).
#include <cuasync/async_io/async_copy_peer.hpp>

namespace cuasync::detail {

void check_peer_copy(stream_ref s, const runtime::tracked_buffer& dst, const runtime::tracked_buffer& src,
                     std::source_location where) {
  constexpr const char* api = "cuasync::async_copy_peer";
  if (!dst || !src) throw_invalid(api, "an empty tracked buffer", where);
  if (!s) throw_invalid(api, "no stream", where);
  if (src.size() > dst.size())
    throw_invalid(api, "the source (" + std::to_string(src.size()) + " B) does not fit the destination (" +
                           std::to_string(dst.size()) + " B)",
                  where);
  const int d = s.context().device_ordinal();
  if (d != dst.context().device_ordinal() && d != src.context().device_ordinal())
    throw_invalid(api, "the stream is on device " + std::to_string(d) + ", neither the source's (" +
                           std::to_string(src.context().device_ordinal()) + ") nor the destination's (" +
                           std::to_string(dst.context().device_ordinal()) + ")",
                  where);
}

}  // namespace cuasync::detail
