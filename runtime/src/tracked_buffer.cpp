// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <algorithm>

namespace cuasync::runtime {

tracked_buffer tracked_buffer::allocate(device_runtime& rt, stream_ref home, std::size_t bytes,
                                        std::source_location where) {
  if (!rt.device_pool().get())
    detail::throw_invalid("cuasync::runtime::tracked_buffer::allocate", "the device has no stream-ordered memory pool",
                          where);
  tracked_buffer b;
  b.events_ = rt.events();
  b.home_ = home;
  b.ptr_ = rt.device_pool().allocate_async(home, bytes, where);
  b.size_ = bytes;
  // The allocation is stream-ordered on `home`: another stream may use the memory only after it (its first use
  // waits on home, as for a write).
  b.last_write_ = stream_use{home, {}};
  return b;
}

tracked_buffer& tracked_buffer::operator=(tracked_buffer&& o) noexcept {
  if (this != &o) {
    free_nothrow();
    event_pool::let_go(std::move(events_));  // maybe the pool's last holder (see the destructor)
    events_ = std::move(o.events_);
    home_ = o.home_;
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
    tracking_ = o.tracking_;
    last_write_ = std::move(o.last_write_);
    reads_ = std::move(o.reads_);
    others_ = std::move(o.others_);
  }
  return *this;
}

tracked_buffer::~tracked_buffer() {
  free_nothrow();
  // Its context's pool's last holder only when destroyed after its runtime (against the documented order): the pool
  // then goes with it rather than at the context's end.
  event_pool::let_go(std::move(events_));
}

void tracked_buffer::wait_for(stream_ref s, stream_use& u, std::source_location where) {
  if (u.stream == s) return;  // same stream: stream order already covers it
  // An event must come from the recording stream's own context: another device's stream takes its context's pool.
  if (!u.after)
    u.after = u.stream.context() == events_->context() ? events_->record(u.stream, where)
                                                        : event_pool::for_context(u.stream.context(), where)->record(u.stream, where);
  u.after.make_wait(s, where);
}

void tracked_buffer::use(stream_ref s, access a, std::source_location where) {
  if (!tracking_) return;
  std::lock_guard lock(lock_);
  if (last_write_) wait_for(s, *last_write_, where);
  if (a != access::read) {
    for (auto& r : reads_) wait_for(s, r, where);
    reads_.clear();
    last_write_ = stream_use{s, {}};
  } else {
    auto it = std::find_if(reads_.begin(), reads_.end(), [&](const stream_use& r) { return r.stream == s; });
    if (it == reads_.end())
      reads_.push_back({s, {}});
    else
      it->after = {};  // a newer use on that stream: an event, if needed, must be recorded after it
  }
  if (!(s == home_)) {
    auto it = std::find_if(others_.begin(), others_.end(), [&](const stream_use& r) { return r.stream == s; });
    if (it == others_.end())
      others_.push_back({s, {}});
    else
      it->after = {};
  }
}

void tracked_buffer::free_nothrow() noexcept {
  if (!ptr_) return;
  const std::source_location unreported{};  // a failure here is deferred, never thrown to a caller
  const CUcontext ctx = home_.context().get();
  const auto* handle = reinterpret_cast<const void*>(ptr_);
  // Every other stream's last use must be done before the memory returns to the pool (a stream-ordered free orders only
  // its own stream). When home cannot be made to wait for one, the host waits for it instead.
  for (auto& u : others_) {
    try {
      wait_for(home_, u, unreported);
    } catch (const cuda_error& e) {
      detail::defer_error(ctx, e.result(), "cuStreamWaitEvent", handle);
      detail::settle_stream(u.stream);
    } catch (...) {
      detail::settle_stream(u.stream);
    }
  }
  if (CUresult r = detail::driver().cuMemFreeAsync(ptr_, home_.get()); r != CUDA_SUCCESS) {
    // Not freed in stream order: cuMemFree frees it once the device is done with it (it waits).
    detail::defer_error(ctx, r, "cuMemFreeAsync", handle);
    detail::settle_stream(home_);
    detail::release_nothrow(ctx, "cuMemFree", handle,
                            [&](const detail::driver_entry_points& d) { return d.cuMemFree(ptr_); });
  }
  ptr_ = 0;
  others_.clear();
  reads_.clear();
  last_write_.reset();
}

}  // namespace cuasync::runtime
