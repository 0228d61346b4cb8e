// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/copy.hpp>

#include <cuasync/driver/detail/instrumented_op.hpp>

#include <optional>

namespace cuasync {

using detail::driver;
using detail::throw_cu;
using detail::throw_invalid;

namespace {

std::string sizes(std::size_t copy, std::size_t room) {
  return "copy of " + std::to_string(copy) + " bytes into a destination of " + std::to_string(room) + " bytes";
}

void check_sizes(const char* api, std::size_t bytes, std::size_t room, stream_ref s, std::source_location w) {
  if (!s) throw_invalid(api, "empty stream", w);
  if (bytes == 0) throw_invalid(api, "zero-size copy on " + s.describe(), w);
  if (bytes > room) throw_invalid(api, sizes(bytes, room) + " on " + s.describe(), w);
}

[[noreturn]] void throw_null(const char* api, bool dst_null, std::size_t bytes, std::size_t room, stream_ref s,
                             std::source_location w) {
  throw_invalid(api,
                std::string(dst_null ? "null destination" : "null source") + " pointer: " + sizes(bytes, room) +
                    " on " + s.describe(),
                w);
}

[[noreturn]] void throw_overlap(const char* api, device_span dst, device_span src, stream_ref s,
                                std::source_location w) {
  throw_invalid(api,
                "source and destination overlap (" + std::to_string(src.size) + " bytes from " +
                    detail::handle_string(reinterpret_cast<void*>(src.ptr)) + " to " +
                    detail::handle_string(reinterpret_cast<void*>(dst.ptr)) + " on " + s.describe() +
                    "); copy through a temporary",
                w);
}

void enqueue_unhooked(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, stream_ref s, const char* direction,
                      std::source_location w) {
  if (CUresult r = driver().cuMemcpyAsync(dst, src, bytes, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemcpyAsync", std::string(direction) + " of " + std::to_string(bytes) + " bytes on " + s.describe(),
             w);
}

// `lane`: the copy engine's direction; `host_side`: the host memory of an H2D or D2H copy (checked for pinning).
void enqueue(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, stream_ref s, trace::lane_kind lane,
             const void* host_side, const char* direction, std::source_location w) {
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]] {
    const trace::category c = detail::current_copy_category();
    std::string name = lane == trace::lane_kind::copy_h2d ? "H2D" : lane == trace::lane_kind::copy_d2h ? "D2H" : "D2D";
    name += c == trace::category::staged_copy_chunk ? " staged chunk" : " copy";
    detail::instrumented_op op(hooks, s, {c, lane, "cuMemcpyAsync", std::move(name), bytes, src, dst, 0, host_side, w});
    enqueue_unhooked(dst, src, bytes, s, direction, w);
    op.enqueued();
    return;
  }
  enqueue_unhooked(dst, src, bytes, s, direction, w);
}

CUdeviceptr host_address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

void copy_async(stream_ref s, device_span dst, std::span<const std::byte> src, std::source_location w) {
  constexpr const char* api = "cuasync::copy_async (host to device)";
  check_sizes(api, src.size(), dst.size, s, w);
  if (!dst.ptr || !src.data()) throw_null(api, !dst.ptr, src.size(), dst.size, s, w);
  enqueue(dst.ptr, host_address(src.data()), src.size(), s, trace::lane_kind::copy_h2d, src.data(), "host to device",
          w);
}

void copy_async(stream_ref s, std::span<std::byte> dst, device_span src, std::source_location w) {
  constexpr const char* api = "cuasync::copy_async (device to host)";
  check_sizes(api, src.size, dst.size(), s, w);
  if (!src.ptr || !dst.data()) throw_null(api, !dst.data(), src.size, dst.size(), s, w);
  enqueue(host_address(dst.data()), src.ptr, src.size, s, trace::lane_kind::copy_d2h, dst.data(), "device to host", w);
}

void copy_async(stream_ref s, device_span dst, device_span src, std::source_location w) {
  constexpr const char* api = "cuasync::copy_async (device to device)";
  check_sizes(api, src.size, dst.size, s, w);
  if (!dst.ptr || !src.ptr) throw_null(api, !dst.ptr, src.size, dst.size, s, w);
  if (dst.ptr < src.ptr + src.size && src.ptr < dst.ptr + src.size) throw_overlap(api, dst, src, s, w);
  enqueue(dst.ptr, src.ptr, src.size, s, trace::lane_kind::copy_d2d, nullptr, "device to device", w);
}

void copy_peer_async(stream_ref s, device_span dst, context_ref dst_ctx, device_span src, context_ref src_ctx,
                     std::source_location w) {
  constexpr const char* api = "cuasync::copy_peer_async";
  check_sizes(api, src.size, dst.size, s, w);
  if (!dst.ptr || !src.ptr) throw_null(api, !dst.ptr, src.size, dst.size, s, w);
  if (dst.ptr < src.ptr + src.size && src.ptr < dst.ptr + src.size)  // unified addressing: unique across devices
    throw_overlap(api, dst, src, s, w);
  std::optional<detail::instrumented_op> op;
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]]
    op.emplace(hooks, s, detail::gpu_op{.category = trace::category::copy, .lane = trace::lane_kind::copy_p2p,
                                        .call = "cuMemcpyPeerAsync", .name = "peer copy", .bytes = src.size,
                                        .src = src.ptr, .dst = dst.ptr, .where = w});
  if (CUresult r = driver().cuMemcpyPeerAsync(dst.ptr, dst_ctx.get(), src.ptr, src_ctx.get(), src.size, s.get());
      r != CUDA_SUCCESS)
    throw_cu(r, "cuMemcpyPeerAsync",
             std::to_string(src.size) + " bytes from device " + std::to_string(src_ctx.device_ordinal()) +
                 " to device " + std::to_string(dst_ctx.device_ordinal()) + " on " + s.describe(),
             w);
  if (op) op->enqueued();
}

void memset_async(stream_ref s, device_span dst, std::uint8_t value, std::source_location w) {
  constexpr const char* api = "cuasync::memset_async";
  if (!s) throw_invalid(api, "empty stream", w);
  if (dst.size == 0 || !dst.ptr) throw_invalid(api, "empty or null destination on " + s.describe(), w);
  std::optional<detail::instrumented_op> op;
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]]
    op.emplace(hooks, s,
               detail::gpu_op{.category = trace::category::memset, .call = "cuMemsetD8Async", .name = "memset",
                              .bytes = dst.size, .dst = dst.ptr, .where = w});
  if (CUresult r = driver().cuMemsetD8Async(dst.ptr, value, dst.size, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemsetD8Async", std::to_string(dst.size) + " bytes on " + s.describe(), w);
  if (op) op->enqueued();
}

void memset32_async(stream_ref s, device_span dst, std::uint32_t value, std::source_location w) {
  constexpr const char* api = "cuasync::memset32_async";
  if (!s) throw_invalid(api, "empty stream", w);
  if (dst.size == 0 || !dst.ptr) throw_invalid(api, "empty or null destination on " + s.describe(), w);
  if (dst.size % 4 || dst.ptr % 4)
    throw_invalid(api, "destination of " + std::to_string(dst.size) + " bytes is not a 4-aligned whole number of "
                       "32-bit words", w);
  std::optional<detail::instrumented_op> op;
  if (const std::uint32_t hooks = trace::active_hooks()) [[unlikely]]
    op.emplace(hooks, s,
               detail::gpu_op{.category = trace::category::memset, .call = "cuMemsetD32Async", .name = "memset",
                              .bytes = dst.size, .dst = dst.ptr, .where = w});
  if (CUresult r = driver().cuMemsetD32Async(dst.ptr, value, dst.size / 4, s.get()); r != CUDA_SUCCESS)
    throw_cu(r, "cuMemsetD32Async", std::to_string(dst.size) + " bytes on " + s.describe(), w);
  if (op) op->enqueued();
}

}  // namespace cuasync
