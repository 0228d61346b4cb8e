// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/runtime/peer.hpp>

#include <map>
#include <mutex>
#include <utility>

namespace cuasync::runtime {

namespace {

// Keyed by the contexts' unique ids (handles are reused by later contexts): true enabled, false not possible.
std::mutex peer_mutex;
std::map<std::pair<unsigned long long, unsigned long long>, bool> peer_state;

}  // namespace

bool enable_peer_access(context_ref from, context_ref to, std::source_location where) {
  if (!from || !to) detail::throw_invalid("cuasync::runtime::enable_peer_access", "empty context", where);
  if (from == to) return false;
  const auto key = std::make_pair(from.id(where), to.id(where));
  std::lock_guard lock(peer_mutex);
  if (auto it = peer_state.find(key); it != peer_state.end()) return it->second;
  bool possible = from.device_ordinal() != to.device_ordinal() && from.device(where).can_access_peer(to.device(where), where);
  if (possible) {
    from.enable_peer_access(to, where);
    // Tracked buffers come from the device's default pool, whose memory ignores cuCtxEnablePeerAccess.
    if (to.device(where).properties(where).memory_pools_supported)
      memory_pool_ref::device_default(to, where).grant_access(from.device_ordinal(), where);
  }
  peer_state.emplace(key, possible);
  return possible;
}

void copy_peer_async(stream_ref s, device_span dst, context_ref dst_ctx, device_span src, context_ref src_ctx,
                     std::source_location where) {
  const context_ref here = s.context();
  const context_ref there = here == dst_ctx ? src_ctx : dst_ctx;
  enable_peer_access(here, there, where);
  cuasync::copy_peer_async(s, dst, dst_ctx, src, src_ctx, where);
}

void copy_peer_async(stream_ref s, tracked_buffer& dst, tracked_buffer& src, std::source_location where) {
  if (!dst || !src) detail::throw_invalid("cuasync::runtime::copy_peer_async", "an empty tracked buffer", where);
  src.use(s, access::read, where);
  dst.use(s, access::write, where);
  runtime::copy_peer_async(s, dst.span(), dst.context(), src.span(), src.context(), where);
}

}  // namespace cuasync::runtime
