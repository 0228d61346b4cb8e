// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/async_io/detail/copy_work.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/runtime/pageable_copy.hpp>

namespace cuasync::detail {

namespace {
constexpr const char* api = "cuasync::async_copy";

// Reports the staged copy's progress to the operation: the stream is free for later operations once every chunk is
// enqueued; the operation completes when the copy is done. Deletes itself then.
struct staged_report final : runtime::staged_copy_callback {
  admission_ticket ticket;
  std::shared_ptr<task_done> done_link;
  void enqueued() noexcept override { ticket.end_hold(); }
  void done(std::error_code ec, std::exception_ptr detail) noexcept override {
    ticket.reset();
    std::shared_ptr<task_done> link = std::move(done_link);
    delete this;
    link->finish(ec, std::move(detail));
  }
};

runtime::device_runtime* runtime_for(runtime::device_runtime* rt, stream_ref s,
                                     std::shared_ptr<runtime::device_runtime>& keep, std::source_location where) {
  if (rt) return rt;
  const context_ref ctx = s.context();
  keep = runtime::device_runtime::for_device(ctx.device_ordinal());
  if (!(keep->context() == ctx))
    throw_invalid(api,
                  "pageable host memory on " + s.describe() +
                      ", which is not on its device's primary context: pass the runtime of that context "
                      "(async_copy(rt, stream, ...)) to stage it, or use pinned memory",
                  where);
  return keep.get();
}
}  // namespace

copy_work make_copy_work(runtime::device_runtime* rt, stream_ref s, const copy_end& dst, const copy_end& src,
                         std::source_location where) {
  if (!s) throw_invalid(api, "empty stream", where);
  if (src.size == 0) throw_invalid(api, "zero-size copy on " + s.describe(), where);
  if (src.size > dst.size)
    throw_invalid(api,
                  "copy of " + std::to_string(src.size) + " bytes into a destination of " + std::to_string(dst.size) +
                      " bytes on " + s.describe(),
                  where);
  if (!dst.writable) throw_invalid(api, "the destination is read-only memory (a span of const bytes)", where);
  if (dst.host && src.host)
    throw_invalid(api, "host to host: copy on the host (std::memcpy), not through a stream", where);
  const std::byte* host = dst.host ? dst.host : src.host;
  if ((!dst.host && !dst.device) || (!src.host && !src.device))
    throw_invalid(api, "null pointer on " + s.describe(), where);
  if (dst.device && src.device && dst.device < src.device + src.size && src.device < dst.device + src.size)
    throw_invalid(api,
                  "source and destination overlap (" + std::to_string(src.size) + " bytes on " + s.describe() +
                      "); copy through a temporary",
                  where);  // here, not when admitted: bad input throws from the call
  copy_work w{dst, src, src.size, nullptr, nullptr, where};
  // Pageable host memory would make the driver's copy wait on the host for the work ahead of it on the stream: an
  // awaited copy goes through the staged copier's ring instead, whatever its size (runtime/pageable_copy.hpp).
  if (host && !dst.block && !src.block && classify_pointer(host) == memory_kind::pageable_host) {
    runtime::device_runtime* r = runtime_for(rt, s, w.rt, where);
    const auto route = runtime::choose_pageable_route(r->options().pageable, runtime::pageable_caller::awaiting,
                                                      src.size, dst.device != 0);
    if (route == runtime::pageable_route::ring) {
      w.staging = &r->staging(where);
      r->count_pageable_copy(true);
    } else {
      r->count_pageable_copy(false);
    }
  }
  return w;
}

void copy_work::operator()(stream_ref s) const {
  if (src.tracked) src.tracked->use(s, runtime::access::read);
  if (dst.tracked) dst.tracked->use(s, runtime::access::write);
  if (dst.host)
    cuasync::copy_async(s, std::span<std::byte>(dst.host, bytes), device_span{src.device, bytes}, where);
  else if (src.host)
    cuasync::copy_async(s, device_span{dst.device, bytes}, std::span<const std::byte>(src.host, bytes), where);
  else
    cuasync::copy_async(s, device_span{dst.device, bytes}, device_span{src.device, bytes}, where);
  if (dst.block) dst.block->record_use(s);
  if (src.block) src.block->record_use(s);
}

void copy_work::operator()(stream_ref s, admission_ticket ticket, std::shared_ptr<task_done> done) const {
  if (src.tracked) src.tracked->use(s, runtime::access::read);
  if (dst.tracked) dst.tracked->use(s, runtime::access::write);
  auto* report = new staged_report;
  report->ticket = std::move(ticket);
  report->done_link = std::move(done);
  try {
    if (dst.host)
      staging->start_to_host(s, std::span<std::byte>(dst.host, bytes), device_span{src.device, bytes}, report);
    else
      staging->start_to_device(s, device_span{dst.device, bytes}, std::span<const std::byte>(src.host, bytes),
                               report);
  } catch (...) {
    delete report;
    throw;
  }
}

}  // namespace cuasync::detail
