// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what the C ABI's handles refer to.
#include "completion_queue.hpp"
#include "handles.hpp"
#include "host_side_work.hpp"
#include <cuasync/runtime/stream_gate.hpp>

#include <cuasync/driver/event.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::c_api {

struct runtime_object {
  std::shared_ptr<runtime::device_runtime> rt;
};

struct stream_object {
  std::shared_ptr<runtime_object> owner;  // null for an adopted stream without a runtime of its own
  stream owned;                           // empty for an adopted stream
  stream_ref ref;
  //! Where its places are counted, looked up once, at the first tracked operation (admission is on every copy,
  //! memset and launch). Not at creation: a stream adopted while it is being captured (PyTorch's in
  //! torch.cuda.graph) cannot be asked its id then; its untracked launches never need the site.
  const admission_site& site() const;

 private:
  mutable std::once_flag site_once_;
  mutable admission_site site_;

 public:
  //! The runtime whose staging serves pageable copies on this stream. Thread-safe. @throws abi_error
  runtime::device_runtime& staging_runtime(const char* call);

  //! Set once stream_native gave its handle out: a created stream can be captured by its caller from then on.
  std::atomic<bool> native_handed_out{false};

  //! Its copies' host-side work and staged copies' holds (shared: a copy finishing on a copy thread reports to it
  //! after the handle may be gone).
  const std::shared_ptr<host_side_work> host = std::make_shared<host_side_work>();
  //! The word its pageable host-to-device copies wait on while the copy threads fill their pinned blocks (a copy in
  //! flight holds the stream object, so the gate outlives it).
  runtime::stream_gate gate;

  //! Launches (and memsets) made without a completion take their places from a credit of up to `unreported_batch()`
  //! places (32; `CUASYNC_C_ABI_LAUNCH_CREDIT`, 1-64, read once, sets it), taken in one engine call (try_admit_n:
  //! the stream's and context's room, nobody waiting overtaken), and give them back together: once the credit is
  //! used, one event is recorded after the last of them and the whole batch's places come back when it completes.
  //! Per launch: this stream's lock and a count, no engine lock. Admission still bounds what is in flight: a place is
  //! taken before its work is enqueued and never given back before that work is done. The unused part of a credit is
  //! given back as soon as an operation waits for admission in the context (checked per launch), before a tracked
  //! operation on this stream (`return_spare_credit`), at `flush_unreported` (which also records the event for the
  //! used part: an admission that found no room, a stream_wait, the stream's end) and on a captured stream (whose
  //! operations take no places).
  //! `enqueue()` puts the work on the stream (it throws what the driver said; its place stays in the credit).
  //! Thread-safe. @throws abi_error (BUSY), cuda_error, std::bad_alloc (the places of a batch whose event could not be
  //! recorded are given back: the record's failure waited for the stream)
  static std::uint32_t unreported_batch() noexcept;
  template <class Enqueue>
  void enqueue_unreported(const char* call, Enqueue&& enqueue) const {
    std::unique_lock lock(unreported_mutex_);
    while (used_ >= credit_.count() || credit_.others_waiting()) [[unlikely]] {
      lock.unlock();
      refill_credit(call);
      lock.lock();
    }
    enqueue();
    if (++used_ < credit_.count()) return;
    admission_ticket full = std::move(credit_);  // all used: its event goes after the last of them
    used_ = 0;
    credit_held_.store(false, std::memory_order_relaxed);
    lock.unlock();
    give_back_after(std::move(full));
  }
  void flush_unreported() const;
  //! Gives the credit's unused places back (the used ones wait for their event). Never throws.
  void return_spare_credit() const noexcept {
    if (credit_held_.load(std::memory_order_relaxed)) return_spare_credit_now();
  }
  //! Flushes the unreported batch, then retires the gate's word (before `owned` goes: the word is kept until the
  //! stream's waits ran).
  ~stream_object();

 private:
  std::mutex fallback_mutex_;
  std::shared_ptr<runtime::device_runtime> fallback_;  // for_device, for adopted streams on a primary context
  mutable std::mutex unreported_mutex_;
  mutable admission_ticket credit_;  // places for launches without a completion: the first used_ used, no event yet
  mutable std::uint32_t used_ = 0;
  mutable std::atomic<bool> credit_held_{false};  // credit_ is not empty (read without the lock by tracked operations)
  void refill_credit(const char* call) const;
  void return_spare_credit_now() const noexcept;
  void give_back_after(admission_ticket batch) const;
};

struct event_object {
  pooled_event event;
  //! Recorded on a stream being captured (event_record): a point of the graph that another stream's event_wait joins
  //! (cuStreamWaitEvent), not work to query; a plain event of its own (a pooled one would be queried for reuse).
  std::optional<cuasync::event> captured;
};

struct buffer_object {
  std::shared_ptr<runtime_object> owner;
  //! The stream it is freed in the order of (device memory) or released after (imported): kept alive with it, so a
  //! stream handle destroyed first (a garbage collector's order) never leaves the free a destroyed CUstream.
  std::shared_ptr<stream_object> home;
  std::optional<runtime::tracked_buffer> device;
  std::optional<runtime::pinned_block> pinned;
  //! An imported DLPack tensor: its deleter is called once the work on `import_stream` up to the free is done; or,
  //! when `released` is set (ABI 1.1), `released` is delivered then instead and the caller calls the deleter.
  void* imported = nullptr;
  stream_ref import_stream;
  delivery released;
  void* data = nullptr;  // the memory's address (device pointer or host address)
  std::size_t size = 0;
  ~buffer_object();
};

struct module_object {
  std::shared_ptr<runtime_object> owner;
  cuasync::module mod;
  std::mutex mutex;
  //! Under `mutex`: one handle per name asked for (kernel_get returns it again: a binding that looks a kernel up on
  //! every call makes no new handle), made stale with the module's; and whether the module's handle is gone.
  std::map<std::string, std::uintptr_t, std::less<>> kernels;
  bool destroyed = false;
};

struct kernel_object {
  std::shared_ptr<module_object> module;  // the module stays loaded while a call uses the kernel
  kernel_ref kernel;
  // ABI 1.4: each parameter's cuasync_arg_type, computed once (a launch compares codes), and the spellings' C
  // strings (the kernel's own, alive with the module); both empty for a kernel without decoded types.
  std::vector<std::uint32_t> arg_types;
  std::vector<const char*> type_names;
};

//! The objects of the handles in a call's arguments.
inline std::shared_ptr<runtime_object> runtime_of(cuasync_runtime h, const char* what) {
  return registry::instance().get<runtime_object>(h, kind::runtime, what);
}
inline std::shared_ptr<stream_object> stream_of(cuasync_stream h, const char* what) {
  return registry::instance().get<stream_object>(h, kind::stream, what);
}

}  // namespace cuasync::c_api
