// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Loads nvJitLink at run time: $CUASYNC_LIBNVJITLINK, else libnvJitLink.so.13, then .12 as the dynamic loader finds
// them, then the same names in each folder of $CUASYNC_NVRTC_SEARCH_PATH. Every entry point is resolved once.
#include <cuasync/jit/nvjitlink.hpp>
#include <cuasync/log.hpp>

#include "library_search.hpp"
#include "nvjitlink_api.hpp"

#include <dlfcn.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>

namespace cuasync {
namespace {

const char* builtin_name(int r) {
  switch (r) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
    default: return nullptr;
  }
}

class nvjitlink_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nvjitlink"; }
  std::string message(int r) const override {
    if (const char* builtin = builtin_name(r)) return builtin;
    return "nvJitLinkResult " + std::to_string(r);
  }
};

}  // namespace

const std::error_category& nvjitlink_category() noexcept {
  // Never destroyed: a cuasync thread still running at exit (a background task past the exit wait) may build an
  // error after static destruction, and a destroyed category's message() crashed there.
  static const nvjitlink_category_impl* instance = new nvjitlink_category_impl;
  return *instance;
}

namespace jit {
namespace {

struct loaded_library {
  detail::nvjitlink_entry_points entries;
  nvjitlink_info info;
  std::optional<std::string> env;  // $CUASYNC_LIBNVJITLINK when it was loaded
};

std::error_code internal() { return {NVJITLINK_ERROR_INTERNAL, nvjitlink_category()}; }

// Its errors keep this location, not a caller's: they arise once per process, then are rethrown.
loaded_library* open_nvjitlink() {
  detail::opened_library opened =
      detail::open_first("CUASYNC_LIBNVJITLINK", {"libnvJitLink.so.13", "libnvJitLink.so.12"});
  if (!opened.handle)
    throw nvjitlink_not_found_error(
        internal(), "dlopen",
        "could not load nvJitLink, the CUDA run-time linker (needed to link LTO-IR):" + opened.tried +
            "\nInstall the CUDA toolkit's nvJitLink (cuda-nvjitlink-13-0) so that the dynamic loader finds it, or "
            "pip's nvidia-nvjitlink and name its lib folder in CUASYNC_NVRTC_SEARCH_PATH (the Python package does), "
            "or set CUASYNC_LIBNVJITLINK to the library's path");
  auto l = std::make_unique<loaded_library>();
  l->env = std::move(opened.env);
  std::string missing;
#define CUASYNC_FETCH_NVJITLINK_ENTRY(name, ...)                                                     \
  l->entries.name = reinterpret_cast<decltype(l->entries.name)>(::dlsym(opened.handle, #name));      \
  if (!l->entries.name && missing.empty()) missing = #name;
  CUASYNC_NVJITLINK_ENTRY_POINTS(CUASYNC_FETCH_NVJITLINK_ENTRY)
#undef CUASYNC_FETCH_NVJITLINK_ENTRY
  if (!missing.empty()) {
    ::dlclose(opened.handle);
    throw nvjitlink_not_found_error(internal(), "dlsym",
                                    "'" + opened.path + "' has no entry point " + missing +
                                        ": it is not nvJitLink (set CUASYNC_LIBNVJITLINK to its path)");
  }
  l->entries.nvJitLinkVersion =
      reinterpret_cast<decltype(l->entries.nvJitLinkVersion)>(::dlsym(opened.handle, "nvJitLinkVersion"));
  if (l->entries.nvJitLinkVersion) l->entries.nvJitLinkVersion(&l->info.major, &l->info.minor);
  l->info.library = opened.path;
  Dl_info where{};
  if (::dladdr(reinterpret_cast<void*>(l->entries.nvJitLinkCreate), &where) && where.dli_fname)
    l->info.library = where.dli_fname;
  return l.release();
}

loaded_library* loaded = nullptr;              // written once, inside the once
std::atomic<bool> published{false};           // set after `loaded`, for readers outside the once

const loaded_library& load_once() {
  static std::once_flag once;
  static std::exception_ptr failure;
  return detail::load_library_once(
      once, loaded, failure, open_nvjitlink,
      [](const loaded_library* l, const std::exception_ptr& failed) {
        if (l) published.store(true, std::memory_order_release);
        logging::write_with(logging::level::info, [&] {
          if (!l) return "nvJitLink not loaded: " + cuasync::detail::cause_of(failed);
          return "nvJitLink " + l->info.version_string() + " loaded from " + l->info.library +
                 (l->env ? " (CUASYNC_LIBNVJITLINK)" : "");
        });
      });
}

}  // namespace

namespace detail {
const nvjitlink_entry_points& nvjitlink() { return load_once().entries; }
}  // namespace detail

const nvjitlink_info& nvjitlink_library() { return load_once().info; }

bool nvjitlink_loaded() noexcept { return published.load(std::memory_order_acquire); }

}  // namespace jit
}  // namespace cuasync
