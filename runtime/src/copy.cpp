// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/runtime/copy.hpp>
#include <cuasync/log.hpp>

namespace cuasync::runtime {

namespace {
// Pageable host memory makes a driver copy slow and partly synchronous (the driver stages it itself): the policy
// (pageable_copy.hpp) decides whether to stage it, and it is counted either way so a framework can see how much of
// its traffic is pageable.
bool use_staging(device_runtime& rt, const void* host, std::size_t n, copy_options o) {
  if (classify_pointer(host) != memory_kind::pageable_host) return false;
  const pageable_copy_policy& p = rt.options().pageable;
  const bool staged = o.stage_pageable && choose_pageable_route(p, pageable_caller::blocking, n, true) ==
                                              pageable_route::ring;
  rt.count_pageable_copy(staged);
  logging::write_with(logging::level::debug, [&] {
    return "pageable copy of " + std::to_string(n) + " bytes: " +
           (staged ? std::string("staged through pinned memory")
                   : o.stage_pageable ? "to the driver (below the staging threshold of " +
                                            std::to_string(p.driver_below_bytes) + " bytes)"
                                      : std::string("to the driver (staging turned off)"));
  });
  return staged;
}
}  // namespace

void copy_blocking(device_runtime& rt, stream_ref s, device_span dst, std::span<const std::byte> src, copy_options o,
                   std::source_location where) {
  if (use_staging(rt, src.data(), src.size(), o))
    rt.staging(where).copy_to_device(s, dst, src, where);
  else
    cuasync::copy_async(s, dst, src, where);
}

void copy_blocking(device_runtime& rt, stream_ref s, std::span<std::byte> dst, device_span src, copy_options o,
                   std::source_location where) {
  if (use_staging(rt, dst.data(), dst.size(), o))
    rt.staging(where).copy_to_host(s, dst, src, where);
  else
    cuasync::copy_async(s, dst, src, where);
}

void copy_async(device_runtime& rt, stream_ref s, device_span dst, std::span<const std::byte> src, copy_options o,
                std::source_location where) {
  copy_blocking(rt, s, dst, src, o, where);
}

void copy_async(device_runtime& rt, stream_ref s, std::span<std::byte> dst, device_span src, copy_options o,
                std::source_location where) {
  copy_blocking(rt, s, dst, src, o, where);
}

void copy_async(device_runtime& rt, stream_ref s, tracked_buffer& dst, std::span<const std::byte> src,
                copy_options o, std::source_location where) {
  dst.use(s, access::write, where);
  copy_async(rt, s, dst.span(), src, o, where);
}

void copy_async(device_runtime& rt, stream_ref s, std::span<std::byte> dst, tracked_buffer& src, copy_options o,
                std::source_location where) {
  src.use(s, access::read, where);
  copy_async(rt, s, dst, src.span(), o, where);
}

void copy_async(stream_ref s, tracked_buffer& dst, tracked_buffer& src, std::source_location where) {
  src.use(s, access::read, where);
  dst.use(s, access::write, where);
  cuasync::copy_async(s, dst.span(), src.span(), where);
}

void copy_async(stream_ref s, tracked_buffer& dst, pinned_block& src, std::source_location where) {
  dst.use(s, access::write, where);
  cuasync::copy_async(s, dst.span(), std::span<const std::byte>(src.bytes()), where);
  src.record_use(s, where);
}

void copy_async(stream_ref s, pinned_block& dst, tracked_buffer& src, std::source_location where) {
  src.use(s, access::read, where);
  cuasync::copy_async(s, dst.bytes(), src.span(), where);
  dst.record_use(s, where);
}

}  // namespace cuasync::runtime
