// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/device.hpp>

#include <cstdio>
#include <memory>
#include <cctype>
#include <mutex>
#include <unordered_map>

namespace cuasync {
namespace {

using detail::check;
using detail::driver;

std::string format_uuid(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

device_properties read_properties(const device& dev, std::source_location where) {
  const auto& d = driver();
  const CUdevice h = dev.native_handle();
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    check(d.cuDeviceGetAttribute(&v, a, h), "cuDeviceGetAttribute", where);
    return v;
  };
  device_properties p;
  p.ordinal = dev.ordinal();
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof name, h), "cuDeviceGetName", where);
  p.name = name;
  p.compute_capability_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p.compute_capability_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  CUuuid uuid{};
  check(d.cuDeviceGetUuid(&uuid, h), "cuDeviceGetUuid", where);
  p.uuid = format_uuid(uuid);
  char bus[64] = {};
  check(d.cuDeviceGetPCIBusId(bus, sizeof bus, h), "cuDeviceGetPCIBusId", where);
  p.pci_bus_id = bus;
  check(d.cuDeviceTotalMem(&p.total_memory, h), "cuDeviceTotalMem", where);
  p.multiprocessor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p.async_engine_count = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  p.concurrent_kernels = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS) != 0;
  p.memory_pools_supported = attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0;
  p.unified_addressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0;
  p.managed_memory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0;
  p.concurrent_managed_access = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0;
  p.can_map_host_memory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0;
  p.cooperative_launch = attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0;
  p.cluster_launch = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
  p.integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
  p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p.max_block_dim = {attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                     attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
  p.max_grid_dim = {attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                    attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
  p.max_shared_memory_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p.max_shared_memory_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p.max_shared_memory_per_multiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p.max_registers_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  p.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  p.l2_cache_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  p.memory_bus_width_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  p.clock_rate_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  p.memory_clock_rate_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  p.pci_domain = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  p.pci_bus = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  p.pci_device = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  // cuCtxGetStreamPriorityRange needs a context; the range is the same for every device of a driver.
  p.stream_priority_least = 0;
  p.stream_priority_greatest = 0;
  {
    CUcontext ctx = nullptr;
    if (d.cuDevicePrimaryCtxRetain(&ctx, h) == CUDA_SUCCESS) {
      scoped_context guard(ctx, where);
      d.cuCtxGetStreamPriorityRange(&p.stream_priority_least, &p.stream_priority_greatest);
    }
    if (ctx) d.cuDevicePrimaryCtxRelease(h);
  }
  return p;
}

}  // namespace

int device::count(std::source_location where) {
  int n = 0;
  check(driver(where).cuDeviceGetCount(&n), "cuDeviceGetCount", where);
  return n;
}

device device::get(int ordinal, std::source_location where) {
  const int n = count(where);
  if (ordinal < 0 || ordinal >= n)
    throw cuda_error(make_error_code(CUDA_ERROR_INVALID_DEVICE), "cuasync::device::get",
                     "device ordinal " + std::to_string(ordinal) + " is out of range: " + std::to_string(n) +
                         " device(s) present (ordinals 0.." + std::to_string(n - 1) + ")",
                     where);
  CUdevice h = 0;
  check(driver().cuDeviceGet(&h, ordinal), "cuDeviceGet", where);
  return device(ordinal, h);
}

std::vector<device> device::all(std::source_location where) {
  std::vector<device> out;
  for (int i = 0, n = count(where); i < n; ++i) out.push_back(get(i, where));
  return out;
}

device device::by_uuid(std::string_view uuid, std::source_location where) {
  auto normal = [](std::string_view u) {
    std::string out;
    if (u.size() >= 4 && (u.substr(0, 4) == "GPU-" || u.substr(0, 4) == "gpu-")) u.remove_prefix(4);
    for (char c : u) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string wanted = normal(uuid);
  std::string present;
  for (device d : all(where)) {
    CUuuid raw{};
    check(driver().cuDeviceGetUuid(&raw, d.handle_), "cuDeviceGetUuid", where);
    const std::string u = format_uuid(raw);
    if (normal(u) == wanted) return d;
    present += (present.empty() ? "" : ", ") + u;
  }
  throw cuda_error(make_error_code(CUDA_ERROR_INVALID_DEVICE), "cuasync::device::by_uuid",
                   "no device has UUID '" + std::string(uuid) + "'; present: " + (present.empty() ? "none" : present),
                   where);
}

const device_properties& device::properties(std::source_location where) const {
  // Attributes never change while the process runs: read each device once. Entries are never erased, so the
  // references handed out stay valid.
  // Never destroyed: cuasync's own threads may ask while the process exits.
  static std::mutex mutex;
  static auto* cache = new std::unordered_map<int, std::unique_ptr<device_properties>>;
  std::lock_guard lock(mutex);
  auto& slot = (*cache)[ordinal_];
  if (!slot) slot = std::make_unique<device_properties>(read_properties(*this, where));
  return *slot;
}

int device::attribute(CUdevice_attribute attr, std::source_location where) const {
  int v = 0;
  if (CUresult r = driver().cuDeviceGetAttribute(&v, attr, handle_); r != CUDA_SUCCESS)
    detail::throw_cu(r, "cuDeviceGetAttribute",
                     "attribute " + std::to_string(int(attr)) + " of device " + std::to_string(ordinal_), where);
  return v;
}

std::pair<std::size_t, std::size_t> device::memory_info(std::source_location where) const {
  primary_context ctx = primary_context::retain(*this, where);
  scoped_context guard(ctx, where);
  std::size_t free_bytes = 0, total = 0;
  check(driver().cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo", where);
  return {free_bytes, total};
}

bool device::can_access_peer(device peer, std::source_location where) const {
  int v = 0;
  check(driver().cuDeviceCanAccessPeer(&v, handle_, peer.handle_), "cuDeviceCanAccessPeer", where);
  return v != 0;
}

std::string driver_version_string() {
  const int v = driver().driver_version;
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace cuasync
