#include <cuasync/runtime/staged_copy.hpp>

#include <cuasync/driver/copy.hpp>

namespace cuasync::runtime {

staged_copier::staged_copier(context_ref ctx, staged_copy_options options)
    : ctx_(ctx), options_(options), team_(options.threads) {
  if (options_.chunk_bytes < 4096 || options_.chunks < 2)
    detail::throw_invalid("cuasync::runtime::staged_copier", "needs at least 2 chunks of at least 4 KiB");
  options_.threads = team_.size();
  ring_ = pinned_buffer::allocate(ctx, options_.chunk_bytes * options_.chunks);
  for (std::size_t i = 0; i < options_.chunks; ++i) slot_done_.push_back(event::create(ctx));
  slot_busy_.assign(options_.chunks, false);
}

void staged_copier::wait_slot(std::size_t i) {
  const std::size_t slot = i % options_.chunks;
  if (!slot_busy_[slot]) return;
  // Spin on the query: the wait is short (one chunk's DMA) and a blocking sync would add a wake-up each chunk.
  for (;;) {
    const CUresult r = slot_done_[slot].query_result();
    if (r == CUDA_SUCCESS) break;
    if (r != CUDA_ERROR_NOT_READY)
      detail::throw_cu(r, "cuEventQuery", "staged copy chunk on device " + std::to_string(ctx_.device_ordinal()),
                       std::source_location::current());
  }
  slot_busy_[slot] = false;
}

void staged_copier::copy_to_device(stream_ref s, device_span dst, std::span<const std::byte> src) {
  if (src.empty()) detail::throw_invalid("cuasync::runtime::staged_copier::copy_to_device", "zero-size copy on " + s.describe());
  if (src.size() > dst.size)
    detail::throw_invalid("cuasync::runtime::staged_copier::copy_to_device",
                          "copy of " + std::to_string(src.size()) + " bytes into a destination of " +
                              std::to_string(dst.size) + " bytes on " + s.describe());
  std::lock_guard lock(mutex_);
  const std::size_t n = src.size(), cb = options_.chunk_bytes;
  for (std::size_t i = 0, off = 0; off < n; ++i, off += cb) {
    const std::size_t len = std::min(cb, n - off);
    wait_slot(i);
    team_.copy(chunk(i), src.data() + off, len, options_.h2d_streaming_stores);
    copy_async(s, dst.subspan(off, len), std::span<const std::byte>(chunk(i), len));
    slot_done_[i % options_.chunks].record(s);
    slot_busy_[i % options_.chunks] = true;
  }
}

void staged_copier::copy_to_host(stream_ref s, std::span<std::byte> dst, device_span src) {
  if (src.size == 0) detail::throw_invalid("cuasync::runtime::staged_copier::copy_to_host", "zero-size copy on " + s.describe());
  if (src.size > dst.size())
    detail::throw_invalid("cuasync::runtime::staged_copier::copy_to_host",
                          "copy of " + std::to_string(src.size) + " bytes into a destination of " +
                              std::to_string(dst.size()) + " bytes on " + s.describe());
  std::lock_guard lock(mutex_);
  const std::size_t n = src.size, cb = options_.chunk_bytes, k = options_.chunks;
  const std::size_t total = (n + cb - 1) / cb;
  auto enqueue = [&](std::size_t i) {
    const std::size_t off = i * cb, len = std::min(cb, n - off);
    wait_slot(i);  // the slot's previous user (from an earlier copy_to_device) must be done
    copy_async(s, std::span<std::byte>(chunk(i), len), src.subspan(off, len));
    slot_done_[i % k].record(s);
    slot_busy_[i % k] = true;
  };
  const bool streaming = n >= options_.d2h_streaming_from_bytes;
  // Keep every slot's DMA in flight while the host drains the oldest one.
  for (std::size_t i = 0; i < std::min(k, total); ++i) enqueue(i);
  for (std::size_t i = 0; i < total; ++i) {
    const std::size_t off = i * cb, len = std::min(cb, n - off);
    wait_slot(i);
    team_.copy(dst.data() + off, chunk(i), len, streaming);
    if (i + k < total) enqueue(i + k);
  }
}

}  // namespace cuasync::runtime
