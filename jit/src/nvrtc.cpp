// Loads NVRTC at run time: $CUASYNC_LIBNVRTC, else libnvrtc.so.13, then libnvrtc.so.12. Every entry point is resolved
// once with dlsym; the version and the supported architectures are read once.
#include <cuasync/jit/detail/nvrtc_api.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

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
  std::vector<std::string> candidates;
  const char* env = std::getenv("CUASYNC_LIBNVRTC");
  std::optional<std::string> env_used;
  if (env && *env) {
    candidates = {env};
    env_used = env;
  }
  else
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12"};
  void* lib = nullptr;
  std::string opened, why;
  for (const auto& c : candidates) {
    if ((lib = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
      opened = c;
      break;
    }
    const char* e = ::dlerror();
    why += "\n  " + c + ": " + (e ? e : "?");
  }
  if (!lib)
    throw nvrtc_not_found_error(make_error_code(NVRTC_ERROR_PROGRAM_CREATION_FAILURE), "dlopen",
                                "could not load NVRTC, the CUDA runtime compiler:" + why +
                                    "\nInstall the CUDA toolkit's NVRTC (cuda-nvrtc-13-0 or cuda-nvrtc-12-x) so that "
                                    "the dynamic loader finds it, or set CUASYNC_LIBNVRTC to the library's path");
  auto l = std::make_unique<loaded_library>();
  l->env = std::move(env_used);
  std::string missing;
#define CUASYNC_FETCH_NVRTC_ENTRY(name)                                                        \
  l->entries.name = reinterpret_cast<decltype(l->entries.name)>(::dlsym(lib, #name));         \
  if (!l->entries.name && missing.empty()) missing = #name;
  CUASYNC_NVRTC_ENTRY_POINTS(CUASYNC_FETCH_NVRTC_ENTRY)
#undef CUASYNC_FETCH_NVRTC_ENTRY
  if (!missing.empty()) {
    ::dlclose(lib);
    throw nvrtc_not_found_error(make_error_code(NVRTC_ERROR_PROGRAM_CREATION_FAILURE), "dlsym",
                                "'" + opened + "' has no entry point " + missing +
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
  info.library = opened;
  Dl_info where{};
  if (::dladdr(reinterpret_cast<void*>(e.nvrtcVersion), &where) && where.dli_fname) info.library = where.dli_fname;
  return l.release();
}

loaded_library* loaded = nullptr;

const loaded_library& load_once() {
  static std::once_flag once;
  static std::exception_ptr failure;
  std::call_once(once, [] {
    try {
      loaded = open_nvrtc();
      loaded_nvrtc.store(&loaded->entries, std::memory_order_release);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (loaded) return *loaded;
  std::rethrow_exception(failure);
}

}  // namespace

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
