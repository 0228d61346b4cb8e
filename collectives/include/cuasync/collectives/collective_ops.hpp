// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Collectives and point-to-point transfers enqueued on cuasync streams. Each call checks its arguments (sizes
//! against the element type and the communicator's size, the stream's device) before NCCL sees them, then only
//! enqueues: it returns once NCCL has queued the work (inside a `group`, once the group ends). To learn that it is
//! done, await it (async_collectives.hpp) or wait for the stream.
//!
//! Buffers are `device_span`s or `runtime::tracked_buffer`s; a tracked buffer's stream waits for its conflicting uses
//! on other streams first (a send buffer is read, a receive buffer written), as launches do.
//!
//! One process driving several GPUs must put the ranks' calls of one collective in one `group` (NCCL's rule: a rank
//! waits in its kernel for the others, so issuing them one by one from one thread can deadlock).

#include <cuasync/collectives/communicator.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <thread>

namespace cuasync::collectives {

//! ncclDataType_t.
enum class data_type : int { int8 = 0, uint8 = 1, int32 = 2, uint32 = 3, int64 = 4, uint64 = 5, float16 = 6,
                             float32 = 7, float64 = 8, bfloat16 = 9 };
//! ncclRedOp_t (the predefined ones).
enum class reduce_op : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };

//! Bytes of one element.
std::size_t element_size(data_type t) noexcept;

template <class T> constexpr data_type data_type_of();
template <> constexpr data_type data_type_of<std::int8_t>() { return data_type::int8; }
template <> constexpr data_type data_type_of<std::uint8_t>() { return data_type::uint8; }
template <> constexpr data_type data_type_of<std::int32_t>() { return data_type::int32; }
template <> constexpr data_type data_type_of<std::uint32_t>() { return data_type::uint32; }
template <> constexpr data_type data_type_of<std::int64_t>() { return data_type::int64; }
template <> constexpr data_type data_type_of<std::uint64_t>() { return data_type::uint64; }
template <> constexpr data_type data_type_of<float>() { return data_type::float32; }
template <> constexpr data_type data_type_of<double>() { return data_type::float64; }

//! A buffer a collective reads or writes: plain device memory, or a tracked buffer (whose uses are ordered).
struct collective_buffer {
  device_span span;
  runtime::tracked_buffer* tracked = nullptr;
  collective_buffer(device_span s) noexcept : span(s) {}  // NOLINT: implicit on purpose
  collective_buffer(runtime::tracked_buffer& b) noexcept : span(b.span()), tracked(&b) {}  // NOLINT
};

//! Every rank's `send` (count elements) reduced into every rank's `recv` (same size; may be `send`).
void all_reduce(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, reduce_op op,
                stream_ref s, std::source_location where = std::source_location::current());
//! `root`'s `send` into every rank's `recv` (same size); `send` is read on the root only.
void broadcast(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, int root,
               stream_ref s, std::source_location where = std::source_location::current());
//! `send` (size() parts) reduced across ranks; rank r receives part r in `recv` (send.size == size() * recv.size).
void reduce_scatter(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, reduce_op op,
                    stream_ref s, std::source_location where = std::source_location::current());
//! Every rank's `send` gathered in rank order into `recv` (recv.size == size() * send.size).
void all_gather(const communicator& c, collective_buffer send, collective_buffer recv, data_type t, stream_ref s,
                std::source_location where = std::source_location::current());
//! Point to point: `buffer` to rank `peer`, which calls `recv` with the same size. Pair them in a `group`.
void send(const communicator& c, collective_buffer buffer, data_type t, int peer, stream_ref s,
          std::source_location where = std::source_location::current());
void recv(const communicator& c, collective_buffer buffer, data_type t, int peer, stream_ref s,
          std::source_location where = std::source_location::current());

//! An NCCL group (`ncclGroupStart` ... `ncclGroupEnd`): the calls made while it is open are issued together when it
//! ends. Groups nest. `end()` reports errors; the destructor ends a group still open and swallows them (call `end`).
//!
//! NCCL's groups are per thread: begin and end a group on one thread, and do not `co_await` inside one (a coroutine
//! may resume on another io thread). `end()` on another thread is refused (CUDA_ERROR_INVALID_VALUE) and changes
//! nothing; the destructor there leaves the group open on its thread (with a message on stderr), since only that
//! thread can end it.
//!
//! A fault domain with calls in an open group is held until the outermost group ends: an abort from another thread
//! (a timeout, the application) waits for it. A call refused inside the group throws at once, and its domain is
//! aborted once the group has ended (NCCL still holds the group's other calls on the communicators until then).
class group {
 public:
  explicit group(std::source_location where = std::source_location::current());
  ~group();
  //! Issues the grouped calls. @throws cuda_error (nccl_category) when ncclGroupEnd fails; collective_error at the
  //! outermost end when a fault domain in the group failed while it was open (e.g. a call refused inside it);
  //! CUDA_ERROR_INVALID_VALUE on another thread than the one that began it.
  void end(std::source_location where = std::source_location::current());
  group(const group&) = delete;
  group& operator=(const group&) = delete;
  //! Groups open on this thread now.
  static int depth() noexcept;

 private:
  bool open_ = false;
  std::thread::id owner_;  // the thread that began it
};

}  // namespace cuasync::collectives
