// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// DLPack 1.x: tensors imported as buffers (their deleter called once, after cuasync's work on them) and buffers
// exported as tensors (the consumer's stream made to wait on the device, never the host).
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include <string>
#include <vector>

namespace cuasync::c_api {

namespace {
// The DLPack 1.x layouts as cuasync.h declares them (api.cpp pins their sizes and offsets).
using dl_managed_tensor_versioned = cuasync_dl_managed_tensor_versioned;
constexpr std::int32_t kDLCUDA = CUASYNC_DL_CUDA, kDLCUDAHost = CUASYNC_DL_CUDA_HOST,
                       kDLCUDAManaged = CUASYNC_DL_CUDA_MANAGED;

void call_deleter(void* managed) noexcept {
  auto* m = static_cast<dl_managed_tensor_versioned*>(managed);
  if (m && m->deleter) m->deleter(m);
}

// Calls an imported tensor's deleter once the work enqueued on its stream so far is done. Deletes itself.
struct deleter_after final : completion_callback {
  void* managed;
  explicit deleter_after(void* m) : managed(m) {}
  void complete(std::error_code) noexcept override {
    call_deleter(managed);  // also after a device error: cuasync's work will never touch it again
    delete this;
  }
};

// What an exported tensor owns: the buffer (kept alive), its shape.
struct export_context {
  std::shared_ptr<buffer_object> buffer;
  std::vector<std::int64_t> shape;
  dl_managed_tensor_versioned tensor{};
};
void delete_export(dl_managed_tensor_versioned* t) {
  delete static_cast<export_context*>(t->manager_ctx);
}

std::size_t element_bytes(const cuasync_dl_data_type& t) {
  return (std::size_t{t.bits} * std::max<std::uint16_t>(t.lanes, 1) + 7) / 8;
}

// The element count of a shape. Refused: a negative extent, and extents (zero ones counted as 1, so that every partial
// product a stride check makes is bounded too) whose product passes INT64_MAX (a size computed from garbage).
std::size_t element_count(const char* call, const std::int64_t* shape, std::int32_t ndim) {
  std::int64_t bound = 1;
  bool empty = false;
  for (std::int32_t i = 0; i < ndim; ++i) {
    const std::int64_t e = shape[i];
    if (e < 0)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           std::string(call) + ": extent " + std::to_string(i) + " is negative (" + std::to_string(e) + ")");
    if (e == 0) {
      empty = true;
      continue;
    }
    if (__builtin_mul_overflow(bound, e, &bound))
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": the shape's extents multiply past 2^63");
  }
  return empty ? 0 : static_cast<std::size_t>(bound);
}

std::size_t byte_size(const char* call, std::size_t count, std::size_t element) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, element, &bytes))
    fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": " + std::to_string(count) + " elements of " +
                                             std::to_string(element) + " bytes overflow a size");
  return bytes;
}
}  // namespace

buffer_object::~buffer_object() {
  if (!imported) return;
  if (released) {
    // The caller calls the deleter itself, on its own thread, when told: the completion of the work so far.
    try {
      complete_after(import_stream, admission_ticket(), released);
    } catch (const std::system_error& e) {
      released(e.code());  // the stream can take no event (its context failed): nothing of cuasync's runs on it
    } catch (...) {
      released(std::make_error_code(std::errc::not_enough_memory));
    }
    return;
  }
  try {
    auto* d = new deleter_after(imported);
    try {
      completion_callbacks::instance().wait(cuda_completion_source::instance().record(import_stream).into_target(), d);
    } catch (...) {
      delete d;
      throw;
    }
  } catch (...) {
    // The stream can take no event (its context failed): no work of cuasync's can still run on the tensor.
    call_deleter(imported);
  }
}

cuasync_error* buffer_import_dlpack(cuasync_buffer_import_dlpack_args* a) noexcept {
  return call("buffer_import_dlpack", a, [](args<cuasync_buffer_import_dlpack_args>& x) {
    auto r = runtime_of(x->runtime, "runtime");
    auto s = stream_of(x->stream, "stream");
    delivery released = make_delivery(x->released, "buffer_import_dlpack (released)");
    auto* m = static_cast<dl_managed_tensor_versioned*>(x->managed);
    if (!m) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_import_dlpack: managed is NULL");
    if (m->version.major != 1)
      fail(CUASYNC_ERROR_UNSUPPORTED, "buffer_import_dlpack: DLPack major version " +
                                          std::to_string(m->version.major) + " (1 is supported)");
    const cuasync_dl_tensor& t = m->dl_tensor;
    const std::int32_t type = t.device.device_type;
    if (type != kDLCUDA && type != kDLCUDAHost && type != kDLCUDAManaged)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_import_dlpack: device type " + std::to_string(type) +
                                               " (CUDA, CUDA host or CUDA managed memory can be imported)");
    if (type == kDLCUDA && t.device.device_id != r->rt->context().device_ordinal())
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_import_dlpack: the tensor is on device " +
                                               std::to_string(t.device.device_id) + ", the runtime on device " +
                                               std::to_string(r->rt->context().device_ordinal()));
    if (t.ndim < 0 || (t.ndim > 0 && !t.shape)) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_import_dlpack: bad shape");
    const std::size_t count = element_count("buffer_import_dlpack", t.shape, t.ndim);
    if (t.strides) {  // compact row-major only
      std::int64_t expected = 1;
      for (std::int32_t i = t.ndim; i-- > 0;) {
        if (t.shape[i] != 1 && t.strides[i] != expected)
          fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_import_dlpack: the tensor is not contiguous");
        expected *= t.shape[i];
      }
    }
    auto b = std::make_shared<buffer_object>();
    b->owner = r;
    b->data = static_cast<std::byte*>(t.data) + t.byte_offset;
    b->size = byte_size("buffer_import_dlpack", count, element_bytes(t.dtype));
    b->import_stream = s->ref;
    b->home = s;
    b->released = std::move(released);
    x->pointer = b->data;
    x->size = b->size;
    buffer_object* raw = b.get();
    x->buffer = to_handle<cuasync_buffer>(registry::instance().add(kind::buffer, std::move(b)));
    raw->imported = m;  // owned from here on: the deleter runs once, when the buffer goes
  });
}

cuasync_error* buffer_export_dlpack(cuasync_buffer_export_dlpack_args* a) noexcept {
  return call("buffer_export_dlpack", a, [](args<cuasync_buffer_export_dlpack_args>& x) {
    auto b = registry::instance().get<buffer_object>(x->buffer, kind::buffer, "buffer");
    auto s = stream_of(x->stream, "stream");
    const cuasync_dl_data_type dtype{x->dtype_code, x->dtype_bits ? x->dtype_bits : std::uint8_t{8},
                                     x->dtype_lanes ? x->dtype_lanes : std::uint16_t{1}};
    auto ctx = std::make_unique<export_context>();
    ctx->buffer = b;
    const std::size_t elem = element_bytes(dtype);
    if (x->ndim < 0 || (x->ndim > 0 && !x->shape)) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_export_dlpack: bad shape");
    if (x->ndim == 0) {
      if (b->size % elem) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_export_dlpack: size is not a whole number of elements");
      ctx->shape.push_back(static_cast<std::int64_t>(b->size / elem));
    } else {
      ctx->shape.assign(x->shape, x->shape + x->ndim);
    }
    const std::size_t count =
        element_count("buffer_export_dlpack", ctx->shape.data(), static_cast<std::int32_t>(ctx->shape.size()));
    const std::size_t needed = byte_size("buffer_export_dlpack", count, elem);
    if (needed > b->size)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_export_dlpack: the shape needs " + std::to_string(needed) +
                                               " bytes, the buffer has " + std::to_string(b->size));
    // The handshake: the consumer's stream waits, on the device, for the producer's work so far.
    if (x->consumer_stream != -1) {
      if (x->consumer_stream == 0)
        fail(CUASYNC_ERROR_INVALID_ARGUMENT, "buffer_export_dlpack: consumer stream 0 is ambiguous in DLPack: pass 1 "
                                             "for the legacy default stream, 2 for the per-thread one, -1 for none");
      const auto handle = reinterpret_cast<CUstream>(x->consumer_stream);
      const stream_ref consumer = handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD
                                      ? stream_ref(handle, s->ref.context())
                                      : stream_ref::adopt(handle);
      if (!(consumer == s->ref)) {
        refuse_if_held(*s, "buffer_export_dlpack");
        event_pool::for_context(s->ref.context())->record(s->ref).make_wait(consumer);
      }
    }
    const memory_kind mk = classify_pointer(b->data);
    dl_managed_tensor_versioned& t = ctx->tensor;
    t.version = {1, 0};
    t.manager_ctx = ctx.get();
    t.deleter = delete_export;
    t.dl_tensor.data = b->data;
    t.dl_tensor.device = {mk == memory_kind::pinned_host ? kDLCUDAHost : mk == memory_kind::managed ? kDLCUDAManaged
                                                                                                    : kDLCUDA,
                          mk == memory_kind::pinned_host ? 0 : s->ref.context().device_ordinal()};
    t.dl_tensor.ndim = static_cast<std::int32_t>(ctx->shape.size());
    t.dl_tensor.dtype = dtype;
    t.dl_tensor.shape = ctx->shape.data();
    t.dl_tensor.strides = nullptr;  // compact row-major
    t.dl_tensor.byte_offset = 0;
    x->managed = &ctx.release()->tensor;
  });
}

}  // namespace cuasync::c_api
