// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Green contexts (green_context.hpp): the SM resource of a device split by count, a descriptor of one part, a green
// context on it, and the ordinary context the driver converts it to.
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/green_context.hpp>

#include <string>

namespace cuasync {

using detail::driver;

namespace {

constexpr const char* api = "cuasync::green_context::create";

void require_support(std::source_location where) {
  const auto& d = driver(where);
  if (!d.cuGreenCtxCreate || !d.cuGreenCtxDestroy || !d.cuDeviceGetDevResource || !d.cuDevSmResourceSplitByCount ||
      !d.cuDevResourceGenerateDesc || !d.cuCtxFromGreenCtx)
    throw driver_too_old_error(make_error_code(CUDA_ERROR_NOT_SUPPORTED), api,
                               "the driver (CUDA " + std::to_string(d.driver_version / 1000) + "." +
                                   std::to_string(d.driver_version % 1000 / 10) + ", '" + d.library +
                                   "') has no green contexts (cuGreenCtxCreate, CUDA 12.4+): update the NVIDIA "
                                   "driver, or use the whole device's context",
                               where);
}

CUdevResource device_sms(cuasync::device dev, unsigned sm_count, std::source_location where) {
  CUdevResource all{};
  if (CUresult r = driver().cuDeviceGetDevResource(dev.native_handle(), &all, CU_DEV_RESOURCE_TYPE_SM))
    detail::throw_cu(r, "cuDeviceGetDevResource", "device " + std::to_string(dev.ordinal()), where);
  if (sm_count == 0 || sm_count > all.sm.smCount)
    detail::throw_invalid(api, std::to_string(sm_count) + " SMs asked of device " + std::to_string(dev.ordinal()) +
                                   ", which has " + std::to_string(all.sm.smCount) + " (at least " +
                                   std::to_string(all.sm.minSmPartitionSize) + " per green context, in steps of " +
                                   std::to_string(all.sm.smCoscheduledAlignment) + ")",
                          where);
  return all;
}

// One group of at least `sm_count` SMs split off `all`; `rest` gets what is left.
CUdevResource split_off(cuasync::device dev, CUdevResource& all, unsigned sm_count, CUdevResource* rest,
                        std::source_location where) {
  CUdevResource part{};
  unsigned groups = 1;
  if (CUresult r = driver().cuDevSmResourceSplitByCount(&part, &groups, &all, rest, 0, sm_count))
    detail::throw_cu(r, "cuDevSmResourceSplitByCount",
                     std::to_string(sm_count) + " of device " + std::to_string(dev.ordinal()) + "'s " +
                         std::to_string(all.sm.smCount) + " SMs",
                     where);
  if (groups != 1)
    detail::throw_invalid(api, "device " + std::to_string(dev.ordinal()) + " cannot give a group of " +
                                   std::to_string(sm_count) + " of its " + std::to_string(all.sm.smCount) + " SMs",
                          where);
  return part;
}

}  // namespace

bool green_context::supported(std::source_location where) {
  const auto& d = driver(where);
  return d.cuGreenCtxCreate && d.cuGreenCtxDestroy && d.cuDeviceGetDevResource && d.cuDevSmResourceSplitByCount &&
         d.cuDevResourceGenerateDesc && d.cuCtxFromGreenCtx;
}

green_context green_context::from_resource(cuasync::device dev, CUdevResource& resource, std::source_location where) {
  CUdevResourceDesc desc = nullptr;
  if (CUresult r = driver().cuDevResourceGenerateDesc(&desc, &resource, 1))
    detail::throw_cu(r, "cuDevResourceGenerateDesc", std::to_string(resource.sm.smCount) + " SMs", where);
  green_context g;
  if (CUresult r = driver().cuGreenCtxCreate(&g.green_, desc, dev.native_handle(), CU_GREEN_CTX_DEFAULT_STREAM))
    detail::throw_cu(r, "cuGreenCtxCreate",
                     std::to_string(resource.sm.smCount) + " SMs of device " + std::to_string(dev.ordinal()), where);
  CUcontext ctx = nullptr;
  if (CUresult r = driver().cuCtxFromGreenCtx(&ctx, g.green_))
    detail::throw_cu(r, "cuCtxFromGreenCtx", "green context " + detail::handle_string(g.green_), where);
  g.ctx_ = context_ref(ctx, dev.ordinal());
  g.sm_count_ = resource.sm.smCount;
  return g;
}

green_context green_context::create(cuasync::device dev, unsigned sm_count, std::source_location where) {
  require_support(where);
  CUdevResource all = device_sms(dev, sm_count, where);
  CUdevResource part = split_off(dev, all, sm_count, nullptr, where);
  return from_resource(dev, part, where);
}

std::pair<green_context, green_context> green_context::split(cuasync::device dev, unsigned first_sm_count,
                                                             std::source_location where) {
  require_support(where);
  CUdevResource all = device_sms(dev, first_sm_count, where);
  CUdevResource rest{};
  CUdevResource first = split_off(dev, all, first_sm_count, &rest, where);
  if (rest.sm.smCount == 0)
    detail::throw_invalid(api, std::to_string(first_sm_count) + " SMs of device " + std::to_string(dev.ordinal()) +
                                   " leave none for the second green context",
                          where);
  green_context a = from_resource(dev, first, where);
  return {std::move(a), from_resource(dev, rest, where)};
}

green_context& green_context::operator=(green_context&& o) noexcept {
  if (this != &o) {
    this->~green_context();
    green_ = std::exchange(o.green_, nullptr);
    ctx_ = std::exchange(o.ctx_, {});
    sm_count_ = o.sm_count_;
  }
  return *this;
}

green_context::~green_context() {
  if (green_)
    if (auto* d = detail::driver_if_loaded())
      detail::defer_error(ctx_.get(), d->cuGreenCtxDestroy(green_), "cuGreenCtxDestroy", green_);
  green_ = nullptr;
}

}  // namespace cuasync
