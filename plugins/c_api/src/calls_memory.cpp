// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Memory (stream-ordered device memory, pooled pinned memory) and copies (pageable memory staged).
#include "calls.hpp"
#include "objects.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/runtime/ordered_copy.hpp>
#include <cuasync/runtime/pageable_copy.hpp>
#include <cuasync/runtime/staged_copy.hpp>

#include <algorithm>

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

// H2D through a whole pinned block: the block, kept by the copy threads until filled and by the completion until the
// DMA out of it is done.
struct copy_in_done final : completion_callback {
  delivery to;
  std::shared_ptr<runtime::pinned_block> block;
  void complete(std::error_code ec) noexcept override {
    to(ec);
    delete this;
  }
};

// H2D, warm: the stream waits on its gate (runtime/stream_gate.hpp) for this copy's number, then DMAs the block, all
// enqueued here in call order; the copy threads fill the block and release the number. Nothing of `src` is read on
// this thread. The fill is submitted before the DMA and the completion's record, whose failure paths wait for the
// stream: the release that lets the stream go on is then already on its way.
// False (nothing enqueued) when the device has no stream memory operations.
bool copy_in_whole(const std::shared_ptr<stream_object>& s, runtime::device_runtime& rt, void* dst, const void* src,
                   runtime::pinned_block taken, admission_ticket& ticket, delivery& to) {
  runtime::staged_copier& staging = rt.staging();
  const std::size_t size = taken.size();
  const std::uint32_t n = s->gate.enqueue_wait(s->ref);
  if (n == 0) return false;
  std::shared_ptr<runtime::pinned_block> block;
  std::unique_ptr<copy_in_done> done;
  try {
    block = std::make_shared<runtime::pinned_block>(std::move(taken));
    done = std::make_unique<copy_in_done>();
  } catch (...) {
    s->gate.release(n);
    throw;
  }
  done->to = std::move(to);
  done->block = block;
  try {
    staging.team().submit(block->get(), src, size, staging.streaming_stores(true, size),
                          [s, n, block]() mutable {
                            s->gate.release(n);
                            block.reset();  // the completion's reference keeps it until the DMA is done
                          });
  } catch (...) {
    s->gate.release(n);
    throw;
  }
  copy_async(s->ref, device_span{device_address(dst), size}, std::span<const std::byte>(block->bytes()));
  completion_callbacks::instance().wait(
      cuda_completion_source::instance().record_wait(s->ref, std::move(ticket)), done.get());
  done.release();  // the engine calls it
  return true;
}

// D2H, warm: the DMA into the block is enqueued here, in stream order; the copy threads copy it out afterwards.
void copy_out_whole(stream_object& s, runtime::device_runtime& rt, void* dst, const void* src,
                    runtime::pinned_block block, admission_ticket ticket, delivery to) {
  runtime::staged_copier& staging = rt.staging();
  const std::size_t size = block.size();
  auto c = std::make_unique<copy_out>();
  c->dst = static_cast<std::byte*>(dst);
  c->team = &staging.team();
  c->streaming = staging.streaming_stores(false, size);
  c->host = s.host;
  c->piece = s.host->start();
  try {
    copy_async(s.ref, block.bytes(), device_span{device_address(src), size});
    c->block = std::move(block);
    c->to = std::move(to);
    completion_callbacks::instance().wait(
        cuda_completion_source::instance().record_wait(s.ref, std::move(ticket)), c.get());
    c.release();  // the engine calls it
  } catch (...) {
    s.host->finish(c->piece);
    throw;
  }
}

// Through the staged copier's ring: the stream is held (later calls on it are BUSY, event records refused) until the
// last chunk is enqueued; the ring's memory, when it is not there yet, is allocated in the background and waited for.
void copy_through_ring(const std::shared_ptr<stream_object>& s, runtime::device_runtime& rt, void* dst,
                       const void* src, std::size_t size, bool to_device, delivery to) {
  runtime::staged_copier& staging = rt.staging();
  auto c = std::make_unique<staged_completion>();
  c->ticket = admit(*s, "copy", true);
  c->stream = s;
  c->piece = s->host->start();
  try {
    s->host->hold();
    c->holding = true;
    c->to = std::move(to);
    if (to_device)
      staging.start_to_device(s->ref, {device_address(dst), size}, {static_cast<const std::byte*>(src), size},
                              c.get());
    else
      staging.start_to_host(s->ref, {static_cast<std::byte*>(dst), size}, {device_address(src), size}, c.get());
    c.release();  // the copier calls it
  } catch (...) {
    c->let_go();
    s->host->finish(c->piece);
    throw;
  }
}

// A copy through a few pinned chunks (runtime/ordered_copy.hpp), every chunk enqueued in the call: its completion
// and, D2H, a piece of the stream's host-side work (the bytes reach host memory after the stream's events).
struct chunks_done final : runtime::ordered_copy_callback {
  delivery to;
  admission_ticket ticket;  // its place until done
  std::shared_ptr<stream_object> stream;  // the gate lives in it
  std::uint64_t piece = 0;
  void done(std::error_code ec) noexcept override {
    ticket.reset();
    to(ec);
    if (piece) stream->host->finish(piece);
    delete this;
  }
};

// Cold, without a block of the copy's size: through the reserved chunks, in stream order in the call. False (nothing
// enqueued) when the device has no stream memory operations.
bool copy_through_chunks(const std::shared_ptr<stream_object>& s, runtime::device_runtime& rt, void* dst,
                         const void* src, std::size_t size, bool to_device, std::vector<runtime::pinned_block> chunks,
                         delivery& to) {
  runtime::staged_copier& staging = rt.staging();
  auto c = std::make_unique<chunks_done>();
  c->ticket = admit(*s, "copy");
  c->stream = s;
  if (!to_device) c->piece = s->host->start();
  try {
    c->to = std::move(to);
    runtime::ordered_copy_request r{
        .s = s->ref,
        .gate = &s->gate,
        .to_device = to_device,
        .host = static_cast<std::byte*>(to_device ? const_cast<void*>(src) : dst),
        .device = device_address(to_device ? dst : src),
        .bytes = size,
        .chunks = std::move(chunks),
        .team = &staging.team(),
        .streaming_stores = staging.streaming_stores(to_device, size),
        .events = rt.events()};
    if (!runtime::start_ordered_copy(std::move(r), c.get())) {
      if (c->piece) s->host->finish(c->piece);
      to = std::move(c->to);  // for the ring
      return false;
    }
    c.release();  // the copy calls it
    return true;
  } catch (...) {
    if (c->piece) s->host->finish(c->piece);
    throw;
  }
}

// Idle chunks for a cold copy of `size`, as many as it uses up to the policy's count (none taken when none is idle);
// each one taken is replaced in the background.
std::vector<runtime::pinned_block> take_chunks(runtime::pinned_pool& pool, const runtime::pageable_copy_policy& p,
                                               std::size_t size) {
  std::vector<runtime::pinned_block> chunks;
  const std::size_t wanted = std::min(p.cold_chunks, (size + p.cold_chunk_bytes - 1) / p.cold_chunk_bytes);
  while (chunks.size() < wanted) {
    runtime::pinned_block b = pool.try_allocate(p.cold_chunk_bytes);
    if (!b) break;
    chunks.push_back(std::move(b));
  }
  if (chunks.size() < p.cold_chunks) pool.warm_async(p.cold_chunk_bytes);
  return chunks;
}

// Pageable memory: never copied on the caller's thread, never waiting there for pinned memory nor allocating it:
// where the policy (runtime/pageable_copy.hpp) sends a non-blocking copy.
void copy_pageable(const std::shared_ptr<stream_object>& s, void* dst, const void* src, std::size_t size,
                   bool to_device, delivery to) {
  runtime::device_runtime& rt = s->staging_runtime("copy");
  rt.reserve_pageable_staging();  // the first pageable copy: chunks and gate words for the next cold ones
  const runtime::pageable_copy_policy& policy = rt.options().pageable;
  const std::shared_ptr<runtime::pinned_pool>& pool = rt.pinned();
  runtime::pageable_resources ready;
  runtime::pinned_block block;
  std::vector<runtime::pinned_block> chunks;
  if (size <= std::max(policy.whole_block_up_to_bytes, policy.chunks_up_to_bytes)) {
    ready.gate = s->gate.ready(pool);  // (a miss asks for its word in the background)
    if (size <= policy.whole_block_up_to_bytes) {
      block = pool->try_allocate(size);
      ready.whole_block = static_cast<bool>(block);
      if (!block) pool->warm_async(size);  // the next copy of this size finds its block
    }
    if (!block && ready.gate && size <= policy.chunks_up_to_bytes) chunks = take_chunks(*pool, policy, size);
    ready.chunks = !chunks.empty();
  }
  switch (runtime::choose_pageable_route(policy, runtime::pageable_caller::non_blocking, size, to_device, ready)) {
    case runtime::pageable_route::whole_block: {
      admission_ticket ticket = admit(*s, "copy");
      if (!to_device) return copy_out_whole(*s, rt, dst, src, std::move(block), std::move(ticket), std::move(to));
      if (copy_in_whole(s, rt, dst, src, std::move(block), ticket, to)) return;
      break;  // no stream memory operations on this device: the ring
    }
    case runtime::pageable_route::chunks:
      if (copy_through_chunks(s, rt, dst, src, size, to_device, std::move(chunks), to)) return;
      break;
    case runtime::pageable_route::driver:
    case runtime::pageable_route::ring:
      break;
  }
  copy_through_ring(s, rt, dst, src, size, to_device, std::move(to));
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
    const bool captured = is_captured(*s);
    const memory_kind dk = classify_pointer(x->dst), sk = classify_pointer(x->src);
    const bool dst_host = dk == memory_kind::pageable_host || dk == memory_kind::pinned_host;
    const bool src_host = sk == memory_kind::pageable_host || sk == memory_kind::pinned_host;
    if (dst_host && src_host) fail(CUASYNC_ERROR_INVALID_ARGUMENT, "copy: host to host (use memcpy)");
    const bool pageable = dk == memory_kind::pageable_host || sk == memory_kind::pageable_host;
    if (pageable && captured)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT,
           "copy: " + s->ref.describe() +
               " is being captured into a CUDA graph, and a pageable copy is staged by host threads through pinned "
               "blocks, which a graph cannot replay: copy from or to pinned memory (buffer_allocate with "
               "CUASYNC_MEMORY_PINNED)");
    if (pageable) return copy_pageable(s, x->dst, x->src, x->size, src_host, std::move(to));
    admission_ticket ticket = captured ? admission_ticket() : admit(*s, "copy");  // a graph node holds no place
    if (src_host)
      copy_async(s->ref, device_span{device_address(x->dst), x->size},
                 std::span<const std::byte>(static_cast<const std::byte*>(x->src), x->size));
    else if (dst_host)
      copy_async(s->ref, std::span<std::byte>(static_cast<std::byte*>(x->dst), x->size),
                 device_span{device_address(x->src), x->size});
    else
      copy_async(s->ref, device_span{device_address(x->dst), x->size}, device_span{device_address(x->src), x->size});
    if (captured) return complete_captured(to);
    complete_after(s->ref, std::move(ticket), std::move(to));
  });
}

cuasync_error* memset(cuasync_memset_args* a) noexcept {
  return call("memset", a, [](args<cuasync_memset_args>& x) {
    auto s = stream_of(x->stream, "stream");
    delivery to = make_delivery(x->completion, "memset");
    if (is_captured(*s)) {  // a graph node: no place, no event
      memset_async(s->ref, device_span{device_address(x->dst), x->size}, x->value);
      return complete_captured(to);
    }
    if (!to)  // no completion asked: its place comes from the stream's credit and comes back in a batch
      return s->enqueue_unreported(
          "memset", [&] { memset_async(s->ref, device_span{device_address(x->dst), x->size}, x->value); });
    admission_ticket ticket = admit(*s, "memset");
    memset_async(s->ref, device_span{device_address(x->dst), x->size}, x->value);
    complete_after(s->ref, std::move(ticket), std::move(to));
  });
}

}  // namespace cuasync::c_api
