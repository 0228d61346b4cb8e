// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include "handles.hpp"

namespace cuasync::c_api {

const char* kind_name(kind k) noexcept {
  switch (k) {
    case kind::runtime: return "runtime";
    case kind::stream: return "stream";
    case kind::event: return "event";
    case kind::buffer: return "buffer";
    case kind::module: return "module";
    case kind::kernel: return "kernel";
    case kind::queue: return "queue";
    case kind::host_token: return "host token";
    case kind::image: return "image";
    case kind::compile_job: return "compile job";
    case kind::replay_anchor: return "replay anchor";
  }
  return "handle";
}

registry& registry::instance() {
  static registry* r = new registry;  // never destroyed: handles may be used during static destruction
  return *r;
}

std::shared_ptr<void> registry::find(std::uintptr_t h, kind k, const char* what, bool erase) const {
  if (h == 0) fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if ((h & 0xff) != static_cast<std::uint8_t>(k))
    fail(CUASYNC_ERROR_STALE_HANDLE, std::string(what) + " is not a " + kind_name(k) + " handle");
  std::lock_guard lock(mutex_);
  auto it = objects_.find(h);
  if (it == objects_.end())
    fail(CUASYNC_ERROR_STALE_HANDLE,
         std::string(what) + " is a " + kind_name(k) + " handle that was destroyed (or never created)");
  std::shared_ptr<void> object = it->second;
  if (erase) {
    objects_.erase(it);
    taken_.fetch_add(1, std::memory_order_release);  // under the lock: no cached lookup of a taken handle is used after
  }
  return object;
}

namespace {
// A thread's last successful lookup of one kind: the handle, the count of handles taken when it was looked up, and a
// weak reference (a cache never keeps an object alive; its handle's destroy destroys it as before).
struct cached_lookup {
  std::uintptr_t handle = 0;
  std::uint64_t taken = 0;
  std::weak_ptr<void> object;
};
thread_local cached_lookup last_lookup[16];  // by kind (the low byte of a handle, below 16)
}  // namespace

std::shared_ptr<void> registry::lookup(std::uintptr_t h, kind k, const char* what) const {
  cached_lookup& c = last_lookup[static_cast<std::uint8_t>(k) & 15];
  // Read before the lookup: a handle taken meanwhile makes the count newer than the one cached with it. Handles are
  // never reused, so an unchanged count means the cached handle still names the same object.
  const std::uint64_t taken = taken_.load(std::memory_order_acquire);
  if (h != 0 && c.handle == h && c.taken == taken)
    if (std::shared_ptr<void> object = c.object.lock()) return object;
  std::shared_ptr<void> object = find(h, k, what, false);
  c.handle = h;
  c.taken = taken;
  c.object = object;
  return object;
}

std::size_t registry::live() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
}

}  // namespace cuasync::c_api
