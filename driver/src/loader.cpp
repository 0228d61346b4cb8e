// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Loads libcuda at run time: dlopen("libcuda.so.1") (never plain libcuda.so, which may be the toolkit's stub),
// then every entry point through cuGetProcAddress_v2 at an explicit version.
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/driver_log.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/log.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <exception>
#include <mutex>
#include <string>

namespace cuasync::detail {

std::atomic<const driver_entry_points*> loaded_driver{nullptr};

namespace {

using get_proc_address_fn = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using init_fn = CUresult(CUDAAPI*)(unsigned int);

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

// Its errors name the loader's line; load_driver(where), which the calls a program makes first use, throws them again
// with the caller's.
driver_entry_points* open_driver() {
  const char* env = std::getenv("CUASYNC_LIBCUDA");
  const std::string path = (env && *env) ? env : "libcuda.so.1";
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    throw driver_not_found_error(make_error_code(CUDA_ERROR_NOT_FOUND), "dlopen",
                                 "could not load the NVIDIA driver library '" + path + "': " + (why ? why : "?") +
                                     ". Install the NVIDIA driver (it provides libcuda.so.1) or set CUASYNC_LIBCUDA "
                                     "to its path");
  }
  auto* get_proc = reinterpret_cast<get_proc_address_fn>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    ::dlclose(lib);
    throw driver_too_old_error(make_error_code(CUDA_ERROR_NOT_SUPPORTED), "dlsym",
                               "'" + path + "' has no cuGetProcAddress_v2: the driver predates CUDA 12.0; cuasync "
                               "needs a driver for CUDA 12.4 or newer");
  }
  auto d = std::make_unique<driver_entry_points>();

  auto fetch = [&](const char* name, int version, void** slot) {
    CUdriverProcAddressQueryResult status{};
    CUresult r = get_proc(name, slot, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r == CUDA_ERROR_STUB_LIBRARY)
      throw stub_library_error(make_error_code(r), "cuGetProcAddress",
                               "'" + path + "' is the CUDA toolkit's stub library, not a driver. Install the NVIDIA "
                               "driver, or point CUASYNC_LIBCUDA at the real libcuda.so.1");
    if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
      *slot = nullptr;
      return false;
    }
    return true;
  };

  // cuInit first: a stub library or a machine without devices says so here.
  init_fn init = nullptr;
  if (!fetch("cuInit", 2000, reinterpret_cast<void**>(&init)))
    throw driver_too_old_error(make_error_code(CUDA_ERROR_NOT_SUPPORTED), "cuGetProcAddress",
                               "'" + path + "' does not provide cuInit");
  CUresult r = init(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    throw stub_library_error(make_error_code(r), "cuInit",
                             "'" + path + "' is the CUDA toolkit's stub library, not a driver. Install the NVIDIA "
                             "driver, or point CUASYNC_LIBCUDA at the real libcuda.so.1");
  if (r == CUDA_ERROR_NO_DEVICE)
    throw no_device_error(make_error_code(r), "cuInit",
                          "the NVIDIA driver is installed but reports no CUDA device (check CUDA_VISIBLE_DEVICES "
                          "and that the GPU is visible to this process)");

  // Resolve every entry point; a missing one means the driver is older than cuasync needs.
  std::string missing;
#define CUASYNC_FETCH_ENTRY(name, version)                                    \
  if (!fetch(#name, version, reinterpret_cast<void**>(&d->name)) && missing.empty()) \
    missing = std::string(#name) + " (CUDA " + version_string(version) + ")";
  CUASYNC_DRIVER_ENTRY_POINTS(CUASYNC_FETCH_ENTRY)
#undef CUASYNC_FETCH_ENTRY
#define CUASYNC_FETCH_OPTIONAL_ENTRY(name, version) fetch(#name, version, reinterpret_cast<void**>(&d->name));
  CUASYNC_DRIVER_OPTIONAL_ENTRY_POINTS(CUASYNC_FETCH_OPTIONAL_ENTRY)
#undef CUASYNC_FETCH_OPTIONAL_ENTRY
  if (d->cuDriverGetVersion) d->cuDriverGetVersion(&d->driver_version);
  if (!missing.empty())
    throw driver_too_old_error(make_error_code(CUDA_ERROR_NOT_SUPPORTED), "cuGetProcAddress",
                               "the driver (CUDA " + version_string(d->driver_version) + ", '" + path +
                                   "') lacks the entry point " + missing + "; cuasync needs a driver for CUDA 12.4 or "
                                   "newer: update the NVIDIA driver");
  if (r != CUDA_SUCCESS) throw_cu(r, "cuInit", "initialising the driver '" + path + "'", std::source_location::current());
  // Only now: a failed load leaves nothing behind (the path lives as long as the process, like the library).
  d->library = ::strdup(path.c_str());
  install_driver_log(*d);
  return d.release();
}

}  // namespace

namespace {
// Said once, by the thread that loaded, after the once is over: a log sink may call into cuasync (even load_driver).
void log_outcome(const driver_entry_points* d, const std::exception_ptr& failure) noexcept {
  logging::write_with(logging::level::info, [&] {
    if (!d) return "libcuda not loaded: " + detail::cause_of(failure);
    std::string where = d->library;
    Dl_info info{};
    if (d->cuDriverGetVersion && ::dladdr(reinterpret_cast<void*>(d->cuDriverGetVersion), &info) && info.dli_fname &&
        where != info.dli_fname)
      where += std::string(" (") + info.dli_fname + ")";
    return "libcuda loaded from " + where + ": driver for CUDA " + version_string(d->driver_version) +
           "; driver log: " + driver_log_state();
  });
}
}  // namespace

const driver_entry_points& load_driver() {
  static std::once_flag once;
  static std::exception_ptr failure;
  bool loaded_here = false;
  std::call_once(once, [&loaded_here] {
    loaded_here = true;
    try {
      loaded_driver.store(open_driver(), std::memory_order_release);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  auto* d = loaded_driver.load(std::memory_order_acquire);
  if (loaded_here) [[unlikely]] {
    log_outcome(d, failure);
    if (d) trace::flight::enable_from_environment();  // CUASYNC_FLIGHT: the flight recorder from the first operation
  }
  if (d) return *d;
  std::rethrow_exception(failure);
}

const driver_entry_points& load_driver(std::source_location where) {
  try {
    return load_driver();
  } catch (const driver_not_found_error& e) {
    throw driver_not_found_error(e.code(), e.api(), e.detail(), where);
  } catch (const stub_library_error& e) {
    throw stub_library_error(e.code(), e.api(), e.detail(), where);
  } catch (const no_device_error& e) {
    throw no_device_error(e.code(), e.api(), e.detail(), where);
  } catch (const driver_too_old_error& e) {
    throw driver_too_old_error(e.code(), e.api(), e.detail(), where);
  } catch (const cuda_error& e) {
    throw cuda_error(e.code(), e.api(), e.detail(), where);
  }
}

}  // namespace cuasync::detail
