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
  if (erase) objects_.erase(it);
  return object;
}

std::size_t registry::live() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
}

}  // namespace cuasync::c_api
