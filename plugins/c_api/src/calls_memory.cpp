// Memory (stream-ordered device memory, pooled pinned memory) and copies (pageable memory staged).
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/runtime/staged_copy.hpp>

namespace cuasync::c_api {

namespace {
// A staged copy on its way to a queue: reported once done, then deletes itself.
struct staged_completion final : runtime::staged_copy_callback {
  delivery to;
  void done(std::error_code ec) noexcept override {
    to(ec);
    delete this;
  }
};

CUdeviceptr device_address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
}  // namespace

cuasync_error* buffer_allocate(cuasync_buffer_allocate_args* a) noexcept {
  return call("buffer_allocate", a, [](args<cuasync_buffer_allocate_args>& x) {
    auto r = runtime_of(x->runtime, "runtime");
    if (x->size == 0) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_allocate: zero bytes");
    auto b = std::make_shared<buffer_object>();
    b->owner = r;
    if (x->kind == CUASYNC_MEMORY_DEVICE) {
      auto s = stream_of(x->stream, "stream");
      b->device.emplace(runtime::tracked_buffer::allocate(*r->rt, s->ref, x->size));
      x->pointer = reinterpret_cast<void*>(b->device->get());
    } else if (x->kind == CUASYNC_MEMORY_PINNED) {
      b->pinned.emplace(r->rt->pinned()->allocate(x->size));
      x->pointer = b->pinned->get();
    } else {
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_allocate: kind " + std::to_string(x->kind));
    }
    x->buffer = to_handle<cuasync_buffer>(registry::instance().add(kind::buffer, std::move(b)));
  });
}

cuasync_error* buffer_free(cuasync_buffer_free_args* a) noexcept {
  return call("buffer_free", a, [](args<cuasync_buffer_free_args>& x) {
    registry::instance().take<buffer_object>(x->buffer, kind::buffer, "buffer");  // stream-ordered / pooled
  });
}

cuasync_error* copy(cuasync_copy_args* a) noexcept {
  return call("copy", a, [](args<cuasync_copy_args>& x) {
    auto s = stream_of(x->stream, "stream");
    if (!x->dst || !x->src) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: null pointer");
    if (x->size == 0) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: zero bytes");
    delivery to = make_delivery(x->completion, "copy");
    const memory_kind dk = classify_pointer(x->dst), sk = classify_pointer(x->src);
    const bool dst_host = dk == memory_kind::pageable_host || dk == memory_kind::pinned_host;
    const bool src_host = sk == memory_kind::pageable_host || sk == memory_kind::pinned_host;
    if (dst_host && src_host) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: host to host (use memcpy)");
    const bool pageable = dk == memory_kind::pageable_host || sk == memory_kind::pageable_host;
    if (pageable) {
      // Staged: the driver's own pageable copy would wait on this thread for the work ahead of it on the stream.
      runtime::staged_copier& staging = s->staging_runtime("copy").staging();
      auto* c = new staged_completion;
      c->to = std::move(to);
      try {
        if (src_host)
          staging.start_to_device(s->ref, {device_address(x->dst), x->size},
                                  {static_cast<const std::byte*>(x->src), x->size}, c);
        else
          staging.start_to_host(s->ref, {static_cast<std::byte*>(x->dst), x->size},
                                {device_address(x->src), x->size}, c);
      } catch (...) {
        delete c;
        throw;
      }
      return;
    }
    if (src_host)
      copy_async(s->ref, device_span{device_address(x->dst), x->size},
                 std::span<const std::byte>(static_cast<const std::byte*>(x->src), x->size));
    else if (dst_host)
      copy_async(s->ref, std::span<std::byte>(static_cast<std::byte*>(x->dst), x->size),
                 device_span{device_address(x->src), x->size});
    else
      copy_async(s->ref, device_span{device_address(x->dst), x->size}, device_span{device_address(x->src), x->size});
    complete_after(s->ref, std::move(to));
  });
}

cuasync_error* memset(cuasync_memset_args* a) noexcept {
  return call("memset", a, [](args<cuasync_memset_args>& x) {
    auto s = stream_of(x->stream, "stream");
    delivery to = make_delivery(x->completion, "memset");
    memset_async(s->ref, device_span{device_address(x->dst), x->size}, x->value);
    complete_after(s->ref, std::move(to));
  });
}

}  // namespace cuasync::c_api
