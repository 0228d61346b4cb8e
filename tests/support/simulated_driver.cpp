// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Detects the simulated libcuda by the library that defines the driver's resolved entry points, not by a path or an
// environment variable: CUASYNC_LIBCUDA may name a real driver, and a real driver never defines the simulated one's
// controls.
#include "simulated_driver.hpp"

#include <cuasync/driver/detail/driver_api.hpp>

#include <dlfcn.h>

#include <string>
#include <vector>

namespace cuasync::test {

namespace {
// The simulated driver's handle, or null (looked up once: the loaded driver never changes in a process).
void* simulated_handle() noexcept {
  static void* const handle = []() -> void* {
    const detail::driver_entry_points* d = nullptr;
    try {
      d = &detail::load_driver();
    } catch (...) {
      return nullptr;
    }
    Dl_info entry{};
    if (!d->cuStreamGetId || !::dladdr(reinterpret_cast<void*>(d->cuStreamGetId), &entry) || !entry.dli_fname)
      return nullptr;
    void* lib = ::dlopen(entry.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return nullptr;
    Dl_info marker{};
    void* report = ::dlsym(lib, "fake_cuda_report");
    // dlsym searches the library's dependencies too: the control must be defined by the entry points' own library.
    if (!report || !::dladdr(report, &marker) || marker.dli_fbase != entry.dli_fbase) {
      ::dlclose(lib);
      return nullptr;
    }
    return lib;  // kept open (a reference the process holds anyway)
  }();
  return handle;
}
}  // namespace

bool simulated_driver_loaded() noexcept { return simulated_handle() != nullptr; }

void* simulated_driver_symbol(const char* name) noexcept {
  void* lib = simulated_handle();
  return lib ? ::dlsym(lib, name) : nullptr;
}

long simulated_live_objects(const char* kind) {
  auto report = reinterpret_cast<int (*)(char*, int)>(simulated_driver_symbol("fake_cuda_report"));
  if (!report) return -1;
  std::vector<char> text(static_cast<std::size_t>(report(nullptr, 0)) + 1);
  report(text.data(), static_cast<int>(text.size()));
  const std::string t(text.data()), key = std::string(" ") + kind + "=";
  const auto at = t.find(key);
  return at == std::string::npos ? -1 : std::stol(t.substr(at + key.size()));
}

long simulated_live_pinned() {
  const long allocated = simulated_live_objects("pinned_host"), registered = simulated_live_objects("registered_host");
  return allocated < 0 || registered < 0 ? -1 : allocated + registered;
}

long simulated_calls_here(const char* entry) noexcept {
  auto calls = reinterpret_cast<long (*)(const char*)>(simulated_driver_symbol("fake_cuda_calls_on_this_thread"));
  return calls ? calls(entry) : -1;
}

long simulated_pinned_allocations_here() noexcept {
  const long allocated = simulated_calls_here("cuMemHostAlloc");
  return allocated < 0 ? -1 : allocated + simulated_calls_here("cuMemHostRegister");
}

}  // namespace cuasync::test
