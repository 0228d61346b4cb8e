#include <cuasync/runtime/event_pool.hpp>

namespace cuasync::runtime {

event event_pool::acquire() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      event e = std::move(free_.back());
      free_.pop_back();
      return e;
    }
    ++created_;
  }
  return event::create(ctx_);
}

void event_pool::release(event e) noexcept {
  if (!e) return;
  try {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(e));
  } catch (...) {
    // Out of memory for the free list: the event is destroyed instead of pooled.
  }
}

std::size_t event_pool::idle() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

std::size_t event_pool::created() const {
  std::lock_guard lock(mutex_);
  return created_;
}

std::shared_ptr<pooled_event> record_pooled(const std::shared_ptr<event_pool>& pool, stream_ref s) {
  auto e = std::make_shared<pooled_event>(pool, pool->acquire());
  e->get().record(s);
  return e;
}

}  // namespace cuasync::runtime
