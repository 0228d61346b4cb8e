#pragma once
//! @file `event_pool`: recycled timing-disabled events, so hot paths never call `cuEventCreate`.

#include <cuasync/driver/event.hpp>

#include <memory>
#include <mutex>
#include <vector>

namespace cuasync::runtime {

//! A pool of timing-disabled events of one context. Thread-safe. Events handed out are owned by a `pooled_event`
//! that returns them on destruction; re-recording a returned event is safe because waits and queries made earlier
//! captured the state at their call.
class event_pool : public std::enable_shared_from_this<event_pool> {
 public:
  explicit event_pool(context_ref ctx) : ctx_(ctx) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  //! An event from the pool (created when the pool is empty). @throws cuda_error
  event acquire();
  //! Returns an event to the pool. Never throws.
  void release(event e) noexcept;
  context_ref context() const noexcept { return ctx_; }
  std::size_t idle() const;
  std::size_t created() const;

 private:
  context_ref ctx_;
  mutable std::mutex mutex_;
  std::vector<event> free_;
  std::size_t created_ = 0;
};

//! An event on loan from an `event_pool`, shareable (e.g. by every buffer that one launch touched).
class pooled_event {
 public:
  pooled_event(std::shared_ptr<event_pool> pool, event e) noexcept : pool_(std::move(pool)), event_(std::move(e)) {}
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;
  ~pooled_event() { pool_->release(std::move(event_)); }
  event_ref get() const noexcept { return event_; }

 private:
  std::shared_ptr<event_pool> pool_;
  event event_;
};

//! Acquires an event from `pool`, records it on `s` and returns it shared. @throws cuda_error
std::shared_ptr<pooled_event> record_pooled(const std::shared_ptr<event_pool>& pool, stream_ref s);

}  // namespace cuasync::runtime
