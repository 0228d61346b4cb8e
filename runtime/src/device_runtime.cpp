#include <cuasync/runtime/device_runtime.hpp>

#include <map>

namespace cuasync::runtime {

device_runtime::device_runtime(int ordinal, device_runtime_options options)
    : options_(options), ctx_(primary_context::retain(ordinal)) {
  events_ = std::make_shared<event_pool>(ctx_);
  streams_ = std::make_unique<stream_pool>(ctx_, options_.streams_per_priority);
  pinned_ = std::make_shared<pinned_pool>(ctx_, events_, options_.pinned_cap_bytes);
  if (ctx_.device().properties().memory_pools_supported) {
    device_pool_ = memory_pool_ref::device_default(ctx_);
    device_pool_.set_release_threshold(options_.device_pool_release_threshold);
  }
}

std::shared_ptr<device_runtime> device_runtime::create(int ordinal, device_runtime_options options) {
  return std::shared_ptr<device_runtime>(new device_runtime(ordinal, options));
}

std::shared_ptr<device_runtime> device_runtime::for_device(int ordinal) {
  static std::mutex mutex;
  static std::map<int, std::shared_ptr<device_runtime>> runtimes;
  device::get(ordinal);  // a clear error for a bad ordinal
  std::lock_guard lock(mutex);
  auto& rt = runtimes[ordinal];
  if (!rt) rt = create(ordinal);
  return rt;
}

staged_copier& device_runtime::staging() {
  std::call_once(staging_once_, [&] { staging_ = std::make_unique<staged_copier>(ctx_, options_.staging); });
  return *staging_;
}

kernel_cache& device_runtime::kernels() {
  std::call_once(kernels_once_, [&] { kernels_ = std::make_unique<kernel_cache>(); });
  return *kernels_;
}

}  // namespace cuasync::runtime
