// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! CUDA devices: enumeration, identity and the attributes a framework needs.

#include <cuasync/driver/error.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync {

//! What a framework needs to know about a device, read once (attributes never change while a process runs).
struct device_properties {
  int ordinal = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  std::string uuid;        //!< `GPU-xxxxxxxx-xxxx-...`, as nvidia-smi prints it
  std::string pci_bus_id;  //!< `0000:3b:00.0`
  std::size_t total_memory = 0;
  int multiprocessor_count = 0;
  int async_engine_count = 0;  //!< copy engines: how many copies can run beside kernels
  bool concurrent_kernels = false;
  bool memory_pools_supported = false;
  bool unified_addressing = false;
  bool managed_memory = false;
  bool concurrent_managed_access = false;
  bool can_map_host_memory = false;
  bool cooperative_launch = false;
  bool cluster_launch = false;
  bool integrated = false;
  int stream_priority_least = 0;     //!< numerically largest = lowest priority
  int stream_priority_greatest = 0;  //!< numerically smallest = highest priority
  int max_threads_per_block = 0;
  std::array<int, 3> max_block_dim{};
  std::array<int, 3> max_grid_dim{};
  int max_shared_memory_per_block = 0;        //!< without opt-in
  int max_shared_memory_per_block_optin = 0;  //!< with `kernel_ref::set_max_dynamic_shared_memory`
  int max_shared_memory_per_multiprocessor = 0;
  int max_registers_per_block = 0;
  int warp_size = 0;
  int l2_cache_bytes = 0;
  int memory_bus_width_bits = 0;
  int clock_rate_khz = 0;
  int memory_clock_rate_khz = 0;
  int pci_domain = 0, pci_bus = 0, pci_device = 0;
};

//! A CUDA device, by ordinal. A cheap value: devices are never created or destroyed by the process.
class device {
 public:
  //! Number of devices the driver reports. @throws cuda_error (and the loader errors) when no driver loads.
  static int count(std::source_location where = std::source_location::current());
  //! Device `ordinal`. @throws cuda_error(CUDA_ERROR_INVALID_DEVICE) naming the ordinal and the device count.
  static device get(int ordinal, std::source_location where = std::source_location::current());
  //! Every device.
  static std::vector<device> all(std::source_location where = std::source_location::current());
  //! The device whose UUID is `uuid` (as nvidia-smi prints it, `GPU-xxxxxxxx-...`; the `GPU-` prefix and case are
  //! optional): stable across processes and `CUDA_VISIBLE_DEVICES` orders, unlike ordinals. Reads no properties (no
  //! context is created). @throws cuda_error(CUDA_ERROR_INVALID_DEVICE) listing the UUIDs present
  static device by_uuid(std::string_view uuid, std::source_location where = std::source_location::current());

  int ordinal() const noexcept { return ordinal_; }
  CUdevice native_handle() const noexcept { return handle_; }

  //! All properties, read once per device and cached. The first call retains the device's primary context for a
  //! moment (the stream priority range is a context query), which creates it if nobody holds it yet.
  const device_properties& properties(std::source_location where = std::source_location::current()) const;
  const std::string& name(std::source_location where = std::source_location::current()) const {
    return properties(where).name;
  }
  //! e.g. 90 for compute capability 9.0
  int compute_capability(std::source_location where = std::source_location::current()) const {
    const device_properties& p = properties(where);
    return p.compute_capability_major * 10 + p.compute_capability_minor;
  }
  //! Any attribute, read from the driver (not cached).
  int attribute(CUdevice_attribute attr, std::source_location where = std::source_location::current()) const;
  //! Free and total device memory now (`cuMemGetInfo`; makes the primary context current for the call).
  std::pair<std::size_t, std::size_t> memory_info(std::source_location where = std::source_location::current()) const;
  //! Whether this device can address `peer`'s memory directly.
  bool can_access_peer(device peer, std::source_location where = std::source_location::current()) const;

  friend bool operator==(device a, device b) noexcept { return a.ordinal_ == b.ordinal_; }

 private:
  device(int ordinal, CUdevice handle) : ordinal_(ordinal), handle_(handle) {}
  int ordinal_ = 0;
  CUdevice handle_ = 0;
};

//! The driver's version as `major.minor` (e.g. "13.0"). @throws the loader errors.
std::string driver_version_string();

}  // namespace cuasync
