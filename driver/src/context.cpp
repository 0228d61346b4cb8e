#include <cuasync/driver/context.hpp>

#include <mutex>
#include <unordered_map>

namespace cuasync {

using detail::check;
using detail::driver;

namespace {
std::mutex deferred_mutex;
std::unordered_map<CUcontext, CUresult>& deferred() {
  static std::unordered_map<CUcontext, CUresult> m;
  return m;
}
}  // namespace

namespace detail {
void defer_error(CUcontext ctx, CUresult r) noexcept {
  if (r == CUDA_SUCCESS) return;
  try {
    std::lock_guard lock(deferred_mutex);
    deferred().try_emplace(ctx, r);
  } catch (...) {
  }
}
void throw_deferred(CUcontext ctx, const char* api, std::source_location where) {
  CUresult r = CUDA_SUCCESS;
  {
    std::lock_guard lock(deferred_mutex);
    auto it = deferred().find(ctx);
    if (it == deferred().end()) return;
    r = it->second;
    deferred().erase(it);
  }
  throw_cu(r, api, "a failure deferred by an earlier destructor in context " + handle_string(ctx), where);
}
void forget_context(CUcontext ctx) noexcept {
  std::lock_guard lock(deferred_mutex);
  deferred().erase(ctx);
}
}  // namespace detail

unsigned long long context_ref::id() const {
  unsigned long long id = 0;
  if (CUresult r = driver().cuCtxGetId(ctx_, &id); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxGetId", "context " + detail::handle_string(ctx_) + " of device " + std::to_string(device_),
                     std::source_location::current());
  return id;
}

std::error_code context_ref::take_deferred_error() const noexcept {
  std::lock_guard lock(deferred_mutex);
  auto it = deferred().find(ctx_);
  if (it == deferred().end()) return {};
  auto code = make_error_code(it->second);
  deferred().erase(it);
  return code;
}

context_ref context_ref::adopt(CUcontext ctx) {
  if (!ctx) detail::throw_invalid("cuasync::context_ref::adopt", "null context");
  scoped_context guard(ctx);
  CUdevice dev = 0;
  check(driver().cuCtxGetDevice(&dev), "cuCtxGetDevice");
  // CUdevice values are ordinals for the driver's enumeration.
  return {ctx, static_cast<int>(dev)};
}

context_ref context_ref::current() {
  CUcontext ctx = nullptr;
  check(driver().cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) return {};
  return adopt(ctx);
}

void context_ref::synchronize() const {
  scoped_context guard(ctx_);
  if (CUresult r = driver().cuCtxSynchronize(); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxSynchronize", "context of device " + std::to_string(device_),
                     std::source_location::current());
  detail::throw_deferred(ctx_, "cuasync::context_ref::synchronize", std::source_location::current());
}

std::pair<int, int> context_ref::stream_priority_range() const {
  scoped_context guard(ctx_);
  int least = 0, greatest = 0;
  check(driver().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
  return {least, greatest};
}

void context_ref::enable_peer_access(context_ref peer) const {
  scoped_context guard(ctx_);
  CUresult r = driver().cuCtxEnablePeerAccess(peer.get(), 0);
  if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return;
  if (r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuCtxEnablePeerAccess",
                     "device " + std::to_string(device_) + " -> device " + std::to_string(peer.device_ordinal()),
                     std::source_location::current());
}

primary_context primary_context::retain(cuasync::device dev) {
  primary_context p;
  if (CUresult r = driver().cuDevicePrimaryCtxRetain(&p.ctx_, dev.native_handle()); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuDevicePrimaryCtxRetain", "device " + std::to_string(dev.ordinal()),
                     std::source_location::current());
  p.device_ = dev.ordinal();
  return p;
}

primary_context& primary_context::operator=(primary_context&& o) noexcept {
  if (this != &o) {
    this->~primary_context();
    ctx_ = std::exchange(o.ctx_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

primary_context::~primary_context() {
  if (ctx_) {
    CUdevice dev = 0;
    if (driver().cuDeviceGet(&dev, device_) == CUDA_SUCCESS) driver().cuDevicePrimaryCtxRelease(dev);
    ctx_ = nullptr;
  }
}

}  // namespace cuasync
