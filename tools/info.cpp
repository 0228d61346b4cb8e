// `cuasync info`: the driver version, then each device with the attributes that shape how work should be issued.
#include "commands.hpp"

#include <cuasync/driver.hpp>

#include <cstdio>

namespace cuasync::tools {
namespace {
void row(const char* key, const std::string& value) { std::printf("  %-36s %s\n", key, value.c_str()); }
void row(const char* key, int value) { row(key, std::to_string(value)); }
void row(const char* key, bool value) { row(key, std::string(value ? "yes" : "no")); }
std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
std::string dims3(const std::array<int, 3>& d) {
  return std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " + std::to_string(d[2]);
}
}  // namespace

int info(int, char**) {
  try {
    const auto& d = detail::driver();
    std::printf("cuasync info\n");
    std::printf("  %-36s %s (%d)\n", "driver (CUDA version)", driver_version_string().c_str(), d.driver_version);
    std::printf("  %-36s %s\n", "library", d.library);
    const int n = device::count();
    std::printf("  %-36s %d\n", "devices", n);
    for (const device& dev : device::all()) {
      const device_properties& p = dev.properties();
      std::printf("\ndevice %d: %s\n", p.ordinal, p.name.c_str());
      row("compute capability", std::to_string(p.compute_capability_major) + "." +
                                    std::to_string(p.compute_capability_minor));
      row("uuid", p.uuid);
      row("pci bus id", p.pci_bus_id);
      row("total memory", mib(p.total_memory));
      row("multiprocessors", p.multiprocessor_count);
      row("asyncEngineCount (copy engines)", p.async_engine_count);
      row("concurrent kernels", p.concurrent_kernels);
      row("memory pools supported", p.memory_pools_supported);
      row("unified addressing", p.unified_addressing);
      row("managed memory", p.managed_memory);
      row("concurrent managed access", p.concurrent_managed_access);
      row("can map host memory", p.can_map_host_memory);
      row("cooperative launch", p.cooperative_launch);
      row("cluster launch", p.cluster_launch);
      row("integrated", p.integrated);
      row("stream priorities (least..greatest)",
          std::to_string(p.stream_priority_least) + " .. " + std::to_string(p.stream_priority_greatest));
      row("max threads per block", p.max_threads_per_block);
      row("max block dims", dims3(p.max_block_dim));
      row("max grid dims", dims3(p.max_grid_dim));
      row("shared memory per block", std::to_string(p.max_shared_memory_per_block) + " B");
      row("shared memory per block (opt-in)", std::to_string(p.max_shared_memory_per_block_optin) + " B");
      row("shared memory per multiprocessor", std::to_string(p.max_shared_memory_per_multiprocessor) + " B");
      row("registers per block", p.max_registers_per_block);
      row("warp size", p.warp_size);
      row("L2 cache", std::to_string(p.l2_cache_bytes >> 10) + " KiB");
      row("memory bus width", std::to_string(p.memory_bus_width_bits) + " bit");
      row("clock", std::to_string(p.clock_rate_khz / 1000) + " MHz");
      row("memory clock", std::to_string(p.memory_clock_rate_khz / 1000) + " MHz");
    }
    return 0;
  } catch (const no_device_error& e) {
    std::fprintf(stderr, "cuasync info: no CUDA device: %s\n", e.what());
    return 3;
  } catch (const cuda_error& e) {
    std::fprintf(stderr, "cuasync info: no usable CUDA driver: %s\n", e.what());
    return 2;
  }
}

}  // namespace cuasync::tools
