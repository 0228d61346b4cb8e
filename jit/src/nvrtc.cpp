// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Loads NVRTC at run time: $CUASYNC_LIBNVRTC, else libnvrtc.so.13, then libnvrtc.so.12 as the dynamic loader finds
// them, then the same names in each folder of $CUASYNC_NVRTC_SEARCH_PATH (the Python package puts pip's
// site-packages/nvidia/*/lib there). Every entry point is resolved once with dlsym; the version and the supported
// architectures are read once.
#include <cuasync/jit/detail/nvrtc_api.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/log.hpp>

#include "library_search.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

namespace cuasync::jit {
namespace detail {

std::atomic<const nvrtc_entry_points*> loaded_nvrtc{nullptr};

namespace {

struct loaded_library {
  nvrtc_entry_points entries;
  nvrtc_info info;
  std::optional<std::string> env;  // $CUASYNC_LIBNVRTC when it was loaded
};

// As the driver's loader: its errors keep this location, not a caller's; they arise once per process, then rethrown.
loaded_library* open_nvrtc() {
  opened_library opened = open_first("CUASYNC_LIBNVRTC", {"libnvrtc.so.13", "libnvrtc.so.12"});
  void* lib = opened.handle;
  if (!lib)
    throw nvrtc_not_found_error(make_error_code(NVRTC_ERROR_PROGRAM_CREATION_FAILURE), "dlopen",
                                "could not load NVRTC, the CUDA runtime compiler:" + opened.tried +
                                    "\nInstall the CUDA toolkit's NVRTC (cuda-nvrtc-13-0 or cuda-nvrtc-12-x) so that "
                                    "the dynamic loader finds it, or pip's nvidia-cuda-nvrtc and name its lib folder "
                                    "in CUASYNC_NVRTC_SEARCH_PATH (the Python package does), or set "
                                    "CUASYNC_LIBNVRTC to the library's path");
  const std::string& opened_path = opened.path;
  auto l = std::make_unique<loaded_library>();
  l->env = std::move(opened.env);
  std::string missing;
#define CUASYNC_FETCH_NVRTC_ENTRY(name)                                                        \
  l->entries.name = reinterpret_cast<decltype(l->entries.name)>(::dlsym(lib, #name));         \
  if (!l->entries.name && missing.empty()) missing = #name;
  CUASYNC_NVRTC_ENTRY_POINTS(CUASYNC_FETCH_NVRTC_ENTRY)
#undef CUASYNC_FETCH_NVRTC_ENTRY
  if (!missing.empty()) {
    ::dlclose(lib);
    throw nvrtc_not_found_error(make_error_code(NVRTC_ERROR_PROGRAM_CREATION_FAILURE), "dlsym",
                                "'" + opened_path + "' has no entry point " + missing +
                                    ": it is not NVRTC, or an NVRTC older than 12.0; cuasync needs NVRTC 12.0 or "
                                    "newer (set CUASYNC_LIBNVRTC to its path)");
  }
  auto& e = l->entries;
  auto& info = l->info;
  e.nvrtcVersion(&info.major, &info.minor);
  int n = 0;
  if (e.nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    info.supported_archs.resize(static_cast<std::size_t>(n));
    if (e.nvrtcGetSupportedArchs(info.supported_archs.data()) != NVRTC_SUCCESS) info.supported_archs.clear();
    std::sort(info.supported_archs.begin(), info.supported_archs.end());
  }
  info.library = opened_path;
  Dl_info where{};
  if (::dladdr(reinterpret_cast<void*>(e.nvrtcVersion), &where) && where.dli_fname) info.library = where.dli_fname;
  return l.release();
}

loaded_library* loaded = nullptr;

// Said once, by the thread that loaded, after the once is over (a log sink may call into cuasync).
void log_outcome(const loaded_library* l, const std::exception_ptr& failure) noexcept {
  logging::write_with(logging::level::info, [&] {
    if (!l) return "NVRTC not loaded: " + cuasync::detail::cause_of(failure);
    std::string archs;
    if (!l->info.supported_archs.empty())
      archs = ", sm_" + std::to_string(l->info.supported_archs.front()) + " to sm_" +
              std::to_string(l->info.supported_archs.back());
    return "NVRTC " + l->info.version_string() + " loaded from " + l->info.library + archs +
           (l->env ? " (CUASYNC_LIBNVRTC)" : "");
  });
}

const loaded_library& load_once() {
  static std::once_flag once;
  static std::exception_ptr failure;
  return detail::load_library_once(
      once, loaded, failure,
      [] {
        loaded_library* l = open_nvrtc();
        loaded_nvrtc.store(&l->entries, std::memory_order_release);
        return l;
      },
      log_outcome);
}

}  // namespace

std::vector<std::string> nvrtc_search_path() {
  std::vector<std::string> dirs;
  const char* v = std::getenv("CUASYNC_NVRTC_SEARCH_PATH");
  for (std::string_view rest = v ? v : ""; !rest.empty();) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) dirs.emplace_back(dir);
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
  }
  return dirs;
}

const nvrtc_entry_points& load_nvrtc() { return load_once().entries; }

const nvrtc_info* loaded_nvrtc_info() noexcept {
  // `loaded` is written before `loaded_nvrtc` is published (release), so it is complete once that is seen.
  return loaded_nvrtc.load(std::memory_order_acquire) ? &loaded->info : nullptr;
}

std::optional<std::string> libnvrtc_env_at_load() {
  return loaded_nvrtc.load(std::memory_order_acquire) ? loaded->env : std::nullopt;
}

}  // namespace detail

bool nvrtc_info::supports(int arch) const noexcept {
  return std::binary_search(supported_archs.begin(), supported_archs.end(), arch);
}

const nvrtc_info& nvrtc_library() { return detail::load_once().info; }

bool nvrtc_loaded() noexcept { return detail::loaded_nvrtc.load(std::memory_order_acquire) != nullptr; }

const std::vector<std::string>& toolkit_include_dirs() {
  static const std::vector<std::string>& dirs = [] () -> const std::vector<std::string>& {
    std::string library;
    try {
      library = nvrtc_library().library;
    } catch (const std::exception&) {
      // No NVRTC: compiling will say so; the include path does not matter then.
    }
    return toolkit_include_dirs(library);
  }();
  return dirs;
}

const std::vector<std::string>& toolkit_include_dirs(const std::string& nvrtc_library_path) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<std::string>> known;  // node-based: references stay valid
  std::lock_guard lock(mutex);
  if (auto it = known.find(nvrtc_library_path); it != known.end()) return it->second;
  auto dirs = [&] {
    namespace fs = std::filesystem;
    std::vector<fs::path> roots;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
    if (!nvrtc_library_path.empty()) {
      // The toolkit the NVRTC belongs to: <root>/lib64/libnvrtc.so.13 or <root>/targets/<arch>/lib/...
      std::error_code ec;
      fs::path lib = fs::weakly_canonical(nvrtc_library_path, ec);
      if (!ec) roots.push_back(lib.parent_path().parent_path());
    }
    roots.emplace_back("/usr/local/cuda");
    std::error_code ec;
    for (const auto& root : roots) {
      const fs::path inc = root / "include";
      if (!fs::exists(inc / "cuda_fp16.h", ec)) continue;
      std::vector<std::string> out{inc.string()};
      if (fs::is_directory(inc / "cccl", ec)) out.push_back((inc / "cccl").string());
      return out;
    }
    return std::vector<std::string>{};
  }();
  return known.emplace(nvrtc_library_path, std::move(dirs)).first->second;
}

}  // namespace cuasync::jit
