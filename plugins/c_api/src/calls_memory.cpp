// Memory (stream-ordered device memory, pooled pinned memory) and copies (pageable memory staged).
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/runtime/staged_copy.hpp>

namespace cuasync::c_api {

namespace {
// A staged copy on its way to a queue: reported once done, then deletes itself. It keeps the stream object (its
// CUstream must outlive the chunks still to be enqueued, whatever the caller destroys meanwhile) and is a piece of
// the stream's host-side work from start to end.
struct staged_completion final : runtime::staged_copy_callback {
  delivery to;
  admission_ticket ticket;  // holds the stream until every chunk is enqueued, its place until done
  std::shared_ptr<stream_object> stream;
  std::uint64_t piece = 0;
  bool holding = false;
  // Once: the stream takes other work again; buffers freed meanwhile go now, after the last chunk.
  void let_go() noexcept {
    if (!holding) return;
    holding = false;
    ticket.end_hold();
    stream->host->let_go();
  }
  void enqueued() noexcept override { let_go(); }
  void done(std::error_code ec, std::exception_ptr) noexcept override {
    let_go();
    ticket.reset();
    to(ec);
    stream->host->finish(piece);
    delete this;
  }
};

CUdeviceptr device_address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Copies up to this size through one pinned block of their whole size, in stream order (larger ones through the
// staged copier's ring, which holds the stream until its last chunk is enqueued).
constexpr std::size_t whole_staging_limit = std::size_t{256} << 20;

// D2H through a whole pinned block: once the DMA into it completes, the copy threads copy it out, then the
// completion is reported. Deletes itself. A piece of the stream's host-side work from the call to the end of the
// copy out (a later stream_wait waits for it).
struct copy_out final : completion_callback {
  runtime::pinned_block block;
  std::byte* dst = nullptr;
  runtime::memcpy_team* team = nullptr;
  bool streaming = false;
  delivery to;
  std::shared_ptr<host_side_work> host;
  std::uint64_t piece = 0;
  void finish(std::error_code ec) noexcept {
    to(ec);
    host->finish(piece);
    delete this;
  }
  void complete(std::error_code ec) noexcept override {
    if (ec) return finish(ec);
    try {
      team->submit(dst, block.get(), block.size(), streaming, [this] { finish({}); });
    } catch (...) {
      finish(std::make_error_code(std::errc::not_enough_memory));
    }
  }
};

// Pageable memory through a pinned block of the copy's size: the host copy happens in the call (H2D, on the copy
// threads, no GPU wait) or after the DMA (D2H), and the DMA is enqueued in the call, so stream order is call order.
void copy_whole(stream_object& s, runtime::device_runtime& rt, void* dst, const void* src, std::size_t size,
                bool to_device, admission_ticket ticket, delivery to) {
  runtime::staged_copier& staging = rt.staging();
  runtime::pinned_block block = rt.pinned()->allocate(size);
  if (to_device) {
    staging.team().copy(block.get(), src, size, staging.options().h2d_streaming_stores);
    copy_async(s.ref, device_span{device_address(dst), size}, std::span<const std::byte>(block.bytes()));
    block.record_use(s.ref);  // the pool hands it out again only after the DMA
    complete_after(s.ref, std::move(ticket), std::move(to));
    return;
  }
  auto c = std::make_unique<copy_out>();
  c->dst = static_cast<std::byte*>(dst);
  c->team = &staging.team();
  c->streaming = size >= staging.options().d2h_streaming_from_bytes;
  c->host = s.host;
  c->piece = s.host->start();
  try {
    copy_async(s.ref, block.bytes(), device_span{device_address(src), size});
    c->block = std::move(block);
    c->to = std::move(to);
    completion_callbacks::instance().wait(
        cuda_completion_source::instance().record(s.ref, std::move(ticket)).into_target(), c.get());
    c.release();  // the engine calls it
  } catch (...) {
    s.host->finish(c->piece);
    throw;
  }
}
}  // namespace

cuasync_error* buffer_allocate(cuasync_buffer_allocate_args* a) noexcept {
  return call("buffer_allocate", a, [](args<cuasync_buffer_allocate_args>& x) {
    auto r = runtime_of(x->runtime, "runtime");
    if (x->size == 0) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_allocate: zero bytes");
    auto b = std::make_shared<buffer_object>();
    b->owner = r;
    if (x->kind == CUASYNC_MEMORY_DEVICE) {
      auto s = stream_of(x->stream, "stream");
      if (!(s->ref.context() == r->rt->context()))
        fail(CUASYNC_ERROR_INVALID_ARGUMENT,
             "buffer_allocate: " + s->ref.describe() + " is not in the runtime's context (device " +
                 std::to_string(r->rt->context().device_ordinal()) + "): allocate on a stream of that context");
      b->device.emplace(runtime::tracked_buffer::allocate(*r->rt, s->ref, x->size));
      b->home = std::move(s);
      x->pointer = reinterpret_cast<void*>(b->device->get());
    } else if (x->kind == CUASYNC_MEMORY_PINNED) {
      b->pinned.emplace(r->rt->pinned()->allocate(x->size));
      x->pointer = b->pinned->get();
    } else {
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_allocate: kind " + std::to_string(x->kind));
    }
    b->data = x->pointer;
    b->size = x->size;
    x->buffer = to_handle<cuasync_buffer>(registry::instance().add(kind::buffer, std::move(b)));
  });
}

cuasync_error* buffer_free(cuasync_buffer_free_args* a) noexcept {
  return call("buffer_free", a, [](args<cuasync_buffer_free_args>& x) {
    std::shared_ptr<buffer_object> b = registry::instance().take<buffer_object>(x->buffer, kind::buffer, "buffer");
    // Freed stream-ordered (or pooled) when it goes; while a staged copy holds its stream, once that copy lets go, so
    // that the free follows the copy's last chunk. The handle is gone either way.
    if (const std::shared_ptr<stream_object> home = b->home) {
      std::shared_ptr<void> keep = std::move(b);
      home->host->defer_while_held(keep);  // else `keep` goes here, before `home`
    }
  });
}

cuasync_error* copy(cuasync_copy_args* a) noexcept {
  return call("copy", a, [](args<cuasync_copy_args>& x) {
    auto s = stream_of(x->stream, "stream");
    if (!x->dst || !x->src) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: null pointer");
    if (x->size == 0) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: zero bytes");
    delivery to = make_delivery(x->completion, "copy");
    refuse_if_captured(*s, "copy");
    const memory_kind dk = classify_pointer(x->dst), sk = classify_pointer(x->src);
    const bool dst_host = dk == memory_kind::pageable_host || dk == memory_kind::pinned_host;
    const bool src_host = sk == memory_kind::pageable_host || sk == memory_kind::pinned_host;
    if (dst_host && src_host) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: host to host (use memcpy)");
    const bool pageable = dk == memory_kind::pageable_host || sk == memory_kind::pageable_host;
    if (pageable && x->size <= whole_staging_limit) {
      // Staged: the driver's own pageable copy would wait on this thread for the work ahead of it on the stream.
      copy_whole(*s, s->staging_runtime("copy"), x->dst, x->src, x->size, src_host, admit(*s, "copy"),
                 std::move(to));
      return;
    }
    if (pageable) {
      runtime::staged_copier& staging = s->staging_runtime("copy").staging();
      auto c = std::make_unique<staged_completion>();
      c->ticket = admit(*s, "copy", true);
      c->stream = s;
      c->piece = s->host->start();
      try {
        s->host->hold();
        c->holding = true;
        c->to = std::move(to);
        if (src_host)
          staging.start_to_device(s->ref, {device_address(x->dst), x->size},
                                  {static_cast<const std::byte*>(x->src), x->size}, c.get());
        else
          staging.start_to_host(s->ref, {static_cast<std::byte*>(x->dst), x->size},
                                {device_address(x->src), x->size}, c.get());
        c.release();  // the copier calls it
      } catch (...) {
        c->let_go();
        s->host->finish(c->piece);
        throw;
      }
      return;
    }
    admission_ticket ticket = admit(*s, "copy");
    if (src_host)
      copy_async(s->ref, device_span{device_address(x->dst), x->size},
                 std::span<const std::byte>(static_cast<const std::byte*>(x->src), x->size));
    else if (dst_host)
      copy_async(s->ref, std::span<std::byte>(static_cast<std::byte*>(x->dst), x->size),
                 device_span{device_address(x->src), x->size});
    else
      copy_async(s->ref, device_span{device_address(x->dst), x->size}, device_span{device_address(x->src), x->size});
    complete_after(s->ref, std::move(ticket), std::move(to));
  });
}

cuasync_error* memset(cuasync_memset_args* a) noexcept {
  return call("memset", a, [](args<cuasync_memset_args>& x) {
    auto s = stream_of(x->stream, "stream");
    delivery to = make_delivery(x->completion, "memset");
    refuse_if_captured(*s, "memset");
    admission_ticket ticket = admit(*s, "memset");
    memset_async(s->ref, device_span{device_address(x->dst), x->size}, x->value);
    complete_after(s->ref, std::move(ticket), std::move(to));
  });
}

}  // namespace cuasync::c_api
