// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// `cuasync info`: the driver version, then each device with the attributes that shape how work should be issued.
#include "commands.hpp"
#ifdef CUASYNC_TOOL_COMPILE
#include "jit_facts.hpp"
#endif

#include <cuasync/driver.hpp>
#include <cuasync/trace/json.hpp>

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

// NVRTC and the JIT cache: in every build with jit/, GPU or not.
void print_jit_text() {
#ifdef CUASYNC_TOOL_COMPILE
  print_text(read_jit_facts());
#endif
}
void add_jit_json([[maybe_unused]] trace::json::writer& w) {
#ifdef CUASYNC_TOOL_COMPILE
  add_json(w, read_jit_facts());
#endif
}

// Which device can address which device's memory directly (cuDeviceCanAccessPeer): peer copies and kernels that
// read another GPU's memory go over NVLink or PCIe there, through host memory elsewhere.
std::vector<std::vector<bool>> peer_matrix() {
  const auto all = device::all();
  std::vector<std::vector<bool>> m(all.size(), std::vector<bool>(all.size(), false));
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = 0; j < all.size(); ++j)
      if (i != j) m[i][j] = all[i].can_access_peer(all[j]);
  return m;
}

void print_peer_matrix() {
  const auto m = peer_matrix();
  std::printf("\npeer access (row device can access column device's memory)\n      ");
  for (std::size_t j = 0; j < m.size(); ++j) std::printf(" %4zu", j);
  std::printf("\n");
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::printf("  %4zu", i);
    for (std::size_t j = 0; j < m.size(); ++j) std::printf(" %4s", i == j ? "-" : m[i][j] ? "yes" : "no");
    std::printf("\n");
  }
}

void print_text(const detail::driver_entry_points& d, int count) {
  std::printf("cuasync info\n");
  std::printf("  %-36s %s (%d)\n", "driver (CUDA version)", driver_version_string().c_str(), d.driver_version);
  std::printf("  %-36s %s\n", "library", d.library);
  std::printf("  %-36s %d\n", "devices", count);
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
  print_peer_matrix();
  print_jit_text();
}

// The same facts, with the struct's field names and plain units (bytes, kHz).
void print_json(const detail::driver_entry_points& d, int count) {
  trace::json::writer w;
  w.begin_object();
  w.key("driver").begin_object().member("cuda_version", driver_version_string());
  w.member("version_number", d.driver_version).member("library", d.library).end_object();
  w.member("device_count", count);
  w.key("devices").begin_array();
  for (const device& dev : device::all()) {
    const device_properties& p = dev.properties();
    auto dims = [&](const char* key, const std::array<int, 3>& v) {
      w.key(key).begin_array().value(v[0]).value(v[1]).value(v[2]).end_array();
    };
    w.begin_object().member("ordinal", p.ordinal).member("name", p.name);
    w.member("compute_capability", std::to_string(p.compute_capability_major) + "." +
                                       std::to_string(p.compute_capability_minor));
    w.member("uuid", p.uuid).member("pci_bus_id", p.pci_bus_id);
    w.member("total_memory_bytes", static_cast<std::uint64_t>(p.total_memory));
    w.member("multiprocessor_count", p.multiprocessor_count).member("async_engine_count", p.async_engine_count);
    w.member("concurrent_kernels", p.concurrent_kernels).member("memory_pools_supported", p.memory_pools_supported);
    w.member("unified_addressing", p.unified_addressing).member("managed_memory", p.managed_memory);
    w.member("concurrent_managed_access", p.concurrent_managed_access);
    w.member("can_map_host_memory", p.can_map_host_memory).member("cooperative_launch", p.cooperative_launch);
    w.member("cluster_launch", p.cluster_launch).member("integrated", p.integrated);
    w.member("stream_priority_least", p.stream_priority_least);
    w.member("stream_priority_greatest", p.stream_priority_greatest);
    w.member("max_threads_per_block", p.max_threads_per_block);
    dims("max_block_dim", p.max_block_dim);
    dims("max_grid_dim", p.max_grid_dim);
    w.member("max_shared_memory_per_block", p.max_shared_memory_per_block);
    w.member("max_shared_memory_per_block_optin", p.max_shared_memory_per_block_optin);
    w.member("max_shared_memory_per_multiprocessor", p.max_shared_memory_per_multiprocessor);
    w.member("max_registers_per_block", p.max_registers_per_block).member("warp_size", p.warp_size);
    w.member("l2_cache_bytes", p.l2_cache_bytes).member("memory_bus_width_bits", p.memory_bus_width_bits);
    w.member("clock_rate_khz", p.clock_rate_khz).member("memory_clock_rate_khz", p.memory_clock_rate_khz);
    w.end_object();
  }
  w.end_array();
  w.key("peer_access").begin_array();  // [i][j]: device i can access device j's memory
  for (const auto& r : peer_matrix()) {
    w.begin_array();
    for (bool b : r) w.value(b);
    w.end_array();
  }
  w.end_array();
  add_jit_json(w);
  w.end_object();
  std::printf("%s\n", w.str().c_str());
}

int run(invocation& inv) {
  try {
    // Without a GPU the JIT facts still hold: shown, then the reason (once, on standard error) and status 3.
    if (const std::string why = why_no_gpu(); !why.empty()) {
      trace::json::writer w;
      w.begin_object();
      add_jit_json(w);
      if (!inv.json()) {
        std::printf("cuasync info\n  %-36s none usable (the reason follows)\n", "devices");
        print_jit_text();
      }
      return inv.fail_within(w, exit_no_gpu, "no_gpu", "no usable GPU: " + why);
    }
    const auto& d = detail::driver();
    const int count = device::count();
    if (inv.json())
      print_json(d, count);
    else
      print_text(d, count);
    return exit_ok;
  } catch (const cuda_error& e) {
    return inv.fail(e);
  }
}

}  // namespace

const command info_command{
    .name = "info",
    .summary = "the driver, each device and its attributes (copy engines, ...), peer access, NVRTC, the JIT cache",
    .description = "Prints the NVIDIA driver's CUDA version and library, then each device's attributes: the ones that "
                   "decide how work should be issued (copy engines, concurrent kernels, memory pools, stream "
                   "priorities, limits), the peer-access matrix, then NVRTC (version, architectures) and the JIT "
                   "disk cache (directory, entries, size). Without a GPU it shows NVRTC and the cache, says why, and "
                   "exits 3.",
    .declare = [](option_set&) -> runner { return run; },
};

}  // namespace cuasync::tools
